fn main() {
    // The linker flags a Node-API addon needs (undefined napi_* symbols resolved by node).
    napi_build::setup();
}
