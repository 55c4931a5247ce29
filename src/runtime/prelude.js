// Code Mode program glue: one function expression the host calls once with
// `host` = { call, take, describe, log, finish, code, finalName, tools,
// freeform, sole, forms, seed, now }.
//   call(name, argsJson) -> 0 answered, 1 pending, 2 refused (Error),
//                           3 refused (TypeError); take() -> its text
//   describe(name) -> the tool's declaration, or undefined (refused; take() -> why)
//   log(text); finish(failed, text, stack)
//   sole[name]: the parameter a lone positional argument stands for;
//   forms[name]: the call's object form, for errors (`tools.write({ path, content })`)
// Nothing of the host is left where the program can reach it: no globals,
// nothing on a prototype. The program is compiled by the AsyncFunction
// constructor, in global scope, outside this closure. Built-ins this glue
// needs are captured before the program runs, so a program that rewrites
// them (Array.prototype.includes, JSON.stringify, Promise.prototype.then)
// changes nothing here; and the host checks every call again anyway.
(function (host) {
  "use strict";
  const hostCall = host.call;
  const hostTake = host.take;
  const hostDescribe = host.describe;
  const hostLog = host.log;
  const hostFinish = host.finish;
  const code = host.code;
  const finalName = host.finalName;
  const names = host.tools;
  const freeformNames = host.freeform;
  const seed = host.seed;
  const now = host.now;
  const stringify = JSON.stringify;
  const apply = Reflect.apply;
  const wellFormed = String.prototype.toWellFormed;
  const defineProperty = Object.defineProperty;
  const isArray = Array.isArray;
  const freeze = Object.freeze;
  const create = Object.create;
  const Str = String;
  const TypeErr = TypeError;
  const Err = Error;
  const PromiseC = Promise;
  const ProxyC = Proxy;
  const RealDate = Date;

  const known = create(null);
  const keys = [];
  let listing = "";
  for (let i = 0; i < names.length; i++) {
    const n = names[i];
    known[n] = true;
    keys[i] = n;
    listing += (i === 0 ? "" : ", ") + n;
  }
  freeze(keys);
  // Read once, before the program runs, into objects with no prototype: a
  // program that adds `Object.prototype.read` changes nothing here.
  const sole = create(null);
  const forms = create(null);
  for (let i = 0; i < names.length; i++) {
    const n = names[i];
    if (typeof host.sole[n] === "string") sole[n] = host.sole[n];
    if (typeof host.forms[n] === "string") forms[n] = host.forms[n];
  }
  // Freeform tools take one string (the whole input), not an object.
  const freeform = create(null);
  for (let i = 0; i < freeformNames.length; i++) freeform[freeformNames[i]] = true;
  // Text to the host is well-formed Unicode (a lone surrogate would not
  // convert, and the error's stack frame would name the host function).
  const unicode = (t) => apply(wellFormed, Str(t), []);
  // Error.prepareStackTrace hands out the functions of every stack frame
  // (CallSite.getFunction, even native ones): fix it to undefined for good.
  defineProperty(Err, "prepareStackTrace", { value: undefined, writable: false, enumerable: false, configurable: false });

  let s = (seed >>> 0) || 0x9e3779b9;
  Math.random = () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
  globalThis.Date = class extends RealDate {
    constructor(...a) { if (a.length === 0) { super(now); } else { super(...a); } }
    static now() { return now; }
  };

  const asJson = (v) => {
    try { const j = stringify(v); return j === undefined ? Str(v) : j; } catch (e) { return Str(v); }
  };
  const show = (v) => {
    if (typeof v === "string") return v;
    try { return asJson(v); } catch (e) { return "[value that cannot be shown]"; }
  };
  const log = (...a) => {
    let line = "";
    for (let i = 0; i < a.length; i++) line += (i === 0 ? "" : " ") + show(a[i]);
    hostLog(unicode(line));
  };
  globalThis.console = { log, info: log, warn: log, error: log, debug: log };

  const kind = (v) => (v === null ? "null" : isArray(v) ? "an array" : typeof v);
  const form = (name) => (typeof forms[name] === "string" ? forms[name] : `tools.${name}({ ... })`);
  const serialise = (name, args, more) => {
    if (more) {
      throw new TypeErr(`tools.${name}: takes one argument, ${freeform[name] === true ? "a string (its whole input)" : `an object of named arguments: ${form(name)}`}`);
    }
    if (freeform[name] === true) {
      if (typeof args !== "string") {
        throw new TypeErr(`tools.${name}: takes one string (its whole input), not ${args === null ? "null" : isArray(args) ? "an array" : typeof args}`);
      }
      return stringify(args);
    }
    if (args === undefined) args = {};
    // `tools.read("a.txt")` where the tool has one parameter: the value is
    // that parameter, as its author meant.
    const t = typeof args;
    if ((t === "string" || t === "number" || t === "boolean") && typeof sole[name] === "string") {
      const o = {};
      o[sole[name]] = args;
      args = o;
    }
    if (args === null || typeof args !== "object" || isArray(args)) {
      throw new TypeErr(`tools.${name}: arguments must be an object of named arguments, not ${kind(args)}: ${form(name)}`);
    }
    // stringify throws a TypeError on BigInt and on cycles itself.
    const json = stringify(args, (k, v) => {
      if (typeof v === "function" || typeof v === "symbol") {
        throw new TypeErr(`tools.${name}: arguments cannot hold a ${typeof v}${k ? ` (at "${k}")` : ""}`);
      }
      return v;
    });
    if (typeof json !== "string") {
      throw new TypeErr(`tools.${name}: arguments must serialise to a JSON object`);
    }
    return json;
  };
  const callOf = (name) => (args, ...rest) => {
    let more = false;
    for (let i = 0; i < rest.length; i++) if (rest[i] !== undefined) more = true;
    const json = serialise(name, args, more);
    const kind = hostCall(name, json);
    const text = hostTake();
    if (kind === 0) return new PromiseC((ok) => ok(text));
    if (kind === 1) return new PromiseC(() => {});
    if (kind === 3) throw new TypeErr(text);
    throw new Err(text);
  };
  const missing = (name) => () => {
    throw new TypeErr(`there is no tool named "${name}"; the tools are: ${listing}`);
  };
  // tools.describe("name"): a tool's full declaration, answered by the
  // host without a tool call. A client tool called `describe` wins.
  const describeTool = (name) => {
    const text = hostDescribe(Str(name));
    if (typeof text !== "string") throw new TypeErr(hostTake());
    return text;
  };
  globalThis.tools = new ProxyC({}, {
    get(_, name) {
      if (typeof name !== "string" || name === "then") return undefined;
      if (known[name] === true) return callOf(name);
      return name === "describe" ? describeTool : missing(name);
    },
    has(_, name) { return typeof name === "string" && known[name] === true; },
    ownKeys() { return keys; },
    getOwnPropertyDescriptor(_, name) {
      return typeof name === "string" && known[name] === true
        ? { enumerable: true, configurable: true, value: callOf(name) }
        : undefined;
    },
  });

  const describe = (e) => {
    try {
      return e && e.name ? `${e.name}: ${e.message}` : Str(e);
    } catch (_) {
      return "Error: the program threw a value that cannot be shown";
    }
  };
  // Where it was thrown: the host reads the program's line from the trace.
  const stackOf = (e) => {
    try {
      const s = e !== null && typeof e === "object" ? e.stack : undefined;
      return typeof s === "string" ? unicode(s) : "";
    } catch (_) {
      return "";
    }
  };
  const finish = (failed, t, e) => {
    let out;
    try { out = unicode(t); } catch (_) { out = "the program's result cannot be shown"; }
    hostFinish(failed, out, failed ? stackOf(e) : "");
  };
  const AsyncFunction = (async function () {}).constructor;
  let program;
  try {
    program = new AsyncFunction(finalName, code);
  } catch (e) {
    finish(true, describe(e), e);
    return;
  }
  // `await` settles through the engine itself, never through a
  // Promise.prototype.then the program may have replaced.
  (async () => {
    let value;
    try {
      // Without a `return`, a final expression statement's value is the
      // result (the host kept it in the parameter), awaited if a promise.
      const kept = { v: undefined };
      value = await program(kept);
      if (value === undefined) value = await kept.v;
    } catch (e) {
      finish(true, describe(e), e);
      return;
    }
    let out;
    try {
      out = value === undefined ? "" : asJson(value);
    } catch (e) {
      finish(true, describe(e), e);
      return;
    }
    finish(false, out);
  })();
});
