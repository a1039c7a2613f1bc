pub mod loopback;
