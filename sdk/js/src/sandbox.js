// What the sandbox does not grant, said in words instead of a trap.
//
// A JavaScript plugin is built with WASI stubbed out (`--backend-qjs-stub-wasi`): the component
// imports no clock, and QuickJS's clock call is a stub that executes `unreachable`. `Date.now()`
// or `new Date()` would end the call as an opaque `trap`, with no word of the clock or of the
// plugin's source line. `guardSandbox` (called by the component's generated entry, never in
// Node tests) makes them throw an `Error` that names the clock instead: a strategy's uncaught
// error comes back to the host as `failed` with this message and the stack.

/** The message for `what` (e.g. `Date.now()`). @param {string} what */
export function noClockMessage(what) {
  return `${what}: a Cairn plugin has no clock (the sandbox grants no WASI clock; JavaScript plugins are built with WASI stubbed out) — use the request's turn indexes and entry order instead of the time`;
}

/**
 * Replaces what reads the clock (`Date.now()`, `new Date()` with no arguments, `Date()`,
 * `performance.now()`) with functions that throw an `Error` naming the missing clock. Dates
 * built from a value (`new Date(0)`, `Date.parse`, `Date.UTC`) keep working.
 * @param {typeof globalThis} [global]
 */
export function guardSandbox(global = globalThis) {
  const RealDate = global.Date;
  if (/** @type {any} */ (RealDate).cairnSandboxed) {
    return;
  }
  /** @param {...any} args */
  function SandboxDate(...args) {
    if (!new.target || args.length === 0) {
      throw new Error(noClockMessage(new.target ? 'new Date()' : 'Date()'));
    }
    return Reflect.construct(RealDate, args, new.target);
  }
  SandboxDate.prototype = RealDate.prototype;
  SandboxDate.parse = RealDate.parse;
  SandboxDate.UTC = RealDate.UTC;
  SandboxDate.now = () => {
    throw new Error(noClockMessage('Date.now()'));
  };
  Object.defineProperty(SandboxDate, 'cairnSandboxed', { value: true });
  global.Date = /** @type {any} */ (SandboxDate);
  const perf = /** @type {any} */ (global).performance;
  if (perf && typeof perf.now === 'function') {
    const now = () => {
      throw new Error(noClockMessage('performance.now()'));
    };
    try {
      Object.defineProperty(perf, 'now', { value: now, configurable: true, writable: true });
    } catch {
      // QuickJS's `performance.now` is read-only and not configurable: it stays a trap.
    }
  }
}
