// Code Mode program glue. Host functions: __cm_call(name, argsJson) -> kind
// (0 answered, 1 pending, 2 refused) and __cm_take() -> its text;
// __cm_log(text); __cm_finish(failed, text). Globals set by the host:
// __cm_code, __cm_tools (names), __cm_seed, __cm_now.
(() => {
  "use strict";
  const known = __cm_tools;
  let s = (__cm_seed >>> 0) || 0x9e3779b9;
  Math.random = () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
  const RealDate = Date;
  const now = __cm_now;
  globalThis.Date = class extends RealDate {
    constructor(...a) { if (a.length === 0) { super(now); } else { super(...a); } }
    static now() { return now; }
  };
  const show = (v) => {
    if (typeof v === "string") return v;
    try { const j = JSON.stringify(v); return j === undefined ? String(v) : j; } catch (e) { return String(v); }
  };
  const asJson = (v) => {
    try { const j = JSON.stringify(v); return j === undefined ? String(v) : j; } catch (e) { return String(v); }
  };
  const log = (...a) => __cm_log(a.map(show).join(" "));
  globalThis.console = { log, info: log, warn: log, error: log, debug: log };
  const serialise = (name, args) => {
    if (args === undefined) args = {};
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      throw new TypeError(`tools.${name}: arguments must be an object, not ${args === null ? "null" : Array.isArray(args) ? "an array" : typeof args}`);
    }
    // JSON.stringify throws a TypeError on BigInt and on cycles itself.
    return JSON.stringify(args, (k, v) => {
      if (typeof v === "function" || typeof v === "symbol") {
        throw new TypeError(`tools.${name}: arguments cannot hold a ${typeof v}${k ? ` (at "${k}")` : ""}`);
      }
      return v;
    });
  };
  const call = (name) => (args) => {
    const json = serialise(name, args);
    const kind = __cm_call(name, json);
    const text = __cm_take();
    if (kind === 0) return Promise.resolve(text);
    if (kind === 1) return new Promise(() => {});
    throw new Error(text);
  };
  globalThis.tools = new Proxy({}, {
    get(_, name) {
      if (typeof name !== "string" || name === "then") return undefined;
      if (!known.includes(name)) {
        return () => { throw new TypeError(`there is no tool named "${name}"; the tools are: ${known.join(", ")}`); };
      }
      return call(name);
    },
    has(_, name) { return known.includes(name); },
    ownKeys() { return [...known]; },
    getOwnPropertyDescriptor(_, name) {
      return known.includes(name) ? { enumerable: true, configurable: true, value: call(name) } : undefined;
    },
  });
  const AsyncFunction = (async function () {}).constructor;
  let program;
  try {
    program = new AsyncFunction(__cm_code);
  } catch (e) {
    __cm_finish(true, `${e.name}: ${e.message}`);
    return;
  }
  program().then(
    (v) => __cm_finish(false, v === undefined ? "" : asJson(v)),
    (e) => __cm_finish(true, e && e.name ? `${e.name}: ${e.message}` : String(e)),
  );
})();
