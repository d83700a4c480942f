package aioserver

import "strconv"

// pythonDriver is the python3 side of the kernel protocol (see kernel).
// A final expression's value is answered as its repr, as Jupyter's
// execute_result shows it. SystemExit is an error; the kernel goes on.
const pythonDriver = `
import ast, json, os, sys, tempfile, traceback
LIMIT = int(sys.argv[1])
P = os.fdopen(os.dup(1), "w", encoding="utf-8")
I = os.fdopen(os.dup(0), "rb")
NUL = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(NUL, fd)
G = {"__name__": "__main__", "__builtins__": __builtins__}
def take(f):
    f.seek(0)
    b = f.read(LIMIT + 1)
    t = b[:LIMIT].decode("utf-8", "replace")
    if len(b) > LIMIT:
        t += "\n[... output truncated ...]\n"
    f.close()
    return t
count = 0
while True:
    h = I.readline()
    if not h:
        break
    req = json.loads(I.read(int(h)))
    count += 1
    res = {"status": "ok", "execution_count": count}
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    try:
        if req.get("cwd"):
            os.chdir(req["cwd"])
        tree = ast.parse(req["code"], "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<cell>", "exec"), G)
        if last is not None:
            v = eval(compile(last, "<cell>", "eval"), G)
            if v is not None:
                res["result"] = repr(v)
    except BaseException as e:
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
        res.update(status="error", ename=type(e).__name__, evalue=str(e),
                   traceback=traceback.format_exception(type(e), e, tb))
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os.dup2(NUL, 1)
        os.dup2(NUL, 2)
    res["stdout"], res["stderr"] = take(out), take(err)
    P.write(json.dumps(res) + "\n")
    P.flush()
`

// nodeDriver is node's side of the kernel protocol: each execution runs
// in one vm context (var, let, const, functions and globalThis last); a
// final value that is a promise is awaited. Code using await at the top
// level runs as the body of an async function: its declarations stay in
// it (assign to globalThis to keep a value). Writes to process.stdout and
// process.stderr (console.*) are captured during an execution and
// discarded between executions.
const nodeDriver = `
const vm = require("vm"), fs = require("fs"), util = require("util");
const LIMIT = Number(process.argv[1]);
const ctx = vm.createContext(Object.assign(Object.create(null), {
  require, console, process, Buffer, setTimeout, clearTimeout, setInterval, clearInterval,
  setImmediate, clearImmediate, URL, TextEncoder, TextDecoder, fetch: globalThis.fetch,
}));
let out = [], err = [], count = 0;
const sink = (arr) => (chunk, enc, cb) => {
  if (arr) arr.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());
  if (typeof enc === "function") enc(); else if (typeof cb === "function") cb();
  return true;
};
process.stdout.write = sink(null); process.stderr.write = sink(null);
const cut = (a) => { const t = a.join(""); return t.length > LIMIT ? t.slice(0, LIMIT) + "\n[... output truncated ...]\n" : t; };
let buf = Buffer.alloc(0), busy = Promise.resolve();
async function run(req) {
  count++;
  out = []; err = [];
  process.stdout.write = sink(out); process.stderr.write = sink(err);
  const res = { status: "ok", execution_count: count };
  try {
    if (req.cwd) process.chdir(req.cwd);
    let script;
    try {
      script = new vm.Script(req.code, { filename: "<cell>" });
    } catch (e) {
      if (!(e instanceof SyntaxError) || !/await/.test(e.message)) throw e;
      script = new vm.Script("(async () => {\n" + req.code + "\n})()", { filename: "<cell>", lineOffset: -1 });
    }
    let v = script.runInContext(ctx);
    if (v && typeof v.then === "function") v = await v;
    if (v !== undefined) res.result = util.inspect(v);
  } catch (e) {
    res.status = "error";
    res.ename = (e && e.name) || "Error";
    res.evalue = (e && e.message !== undefined) ? String(e.message) : String(e);
    res.traceback = String((e && e.stack) || e).split("\n");
  }
  process.stdout.write = sink(null); process.stderr.write = sink(null);
  res.stdout = cut(out); res.stderr = cut(err);
  fs.writeSync(1, JSON.stringify(res) + "\n");
}
process.stdin.on("data", (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  for (;;) {
    const nl = buf.indexOf(10);
    if (nl < 0) return;
    const n = Number(buf.subarray(0, nl).toString());
    if (buf.length < nl + 1 + n) return;
    const req = JSON.parse(buf.subarray(nl + 1, nl + 1 + n).toString());
    buf = buf.subarray(nl + 1 + n);
    busy = busy.then(() => run(req));
  }
});
process.stdin.on("end", () => busy.then(() => process.exit(0)));
`

// kernelCommand is the shell command starting lang's interpreter.
func kernelCommand(lang string) string {
	limit := strconv.Itoa(kernelOutput)
	if lang == langJS {
		return "exec node -e " + shQuote(nodeDriver) + " " + limit
	}
	return "exec python3 -u -c " + shQuote(pythonDriver) + " " + limit
}
