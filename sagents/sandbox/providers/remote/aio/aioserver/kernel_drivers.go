package aioserver

import "strconv"

// pythonDriver is the python3 side of the kernel protocol (see kernel).
// A final expression's value is answered as its repr, as Jupyter's
// execute_result shows it. SystemExit is an error; the kernel goes on.
const pythonDriver = `
import ast, json, os, sys, tempfile, time, traceback
LIMIT = int(sys.argv[1])
P = os.fdopen(os.dup(1), "w", encoding="utf-8")
I = os.fdopen(os.dup(0), "rb")
NUL = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(NUL, fd)
G = {"__name__": "__main__", "__builtins__": __builtins__}
try:
    import ctypes
    LIBC = ctypes.CDLL(None, use_errno=True)
except Exception:
    LIBC = None
def name(n):
    if LIBC is not None and LIBC.prctl(15, n.encode(), 0, 0, 0) == 0:
        return
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(n)
    except OSError:
        pass
# The fork template: this process (the command's) only supervises; the
# kernel is its child. A checkpoint forks the kernel: the copy holds the
# state, blocked on a pipe. A rollback hands over to the copy (it forks a
# fresh copy first, for the next rollback to the same id) and ends. Copies
# orphaned by a kernel's end come back to this process (subreaper), which
# ends with the kernel that was not handed over.
SR, SW = os.pipe()
TEMPLATE = LIBC is not None and LIBC.prctl(36, 1, 0, 0, 0) == 0
LIVE = os.fork() if TEMPLATE else 0
if LIVE:
    name("sage-kernsup")
    os.close(SW)
    os.set_blocking(SR, False)
    I.close()
    P.close()
    pend = b""
    while True:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid != LIVE:
            continue
        try:
            pend += os.read(SR, 65536)
        except BlockingIOError:
            pass
        # Handovers in order: a kernel resumed and handed over again
        # before this one was reaped is a link of the chain.
        nxt = LIVE
        lines = pend.split(b"\n")
        pend = lines.pop()
        for ln in lines:
            a, b = ln.split()
            if int(a) == nxt:
                nxt = int(b)
        if nxt == LIVE:
            # The kernel ended: its copies go with it, before this does.
            try:
                kids = open("/proc/self/task/%d/children" % os.getpid()).read().split()
            except OSError:
                kids = []
            for c in kids:
                try:
                    if open("/proc/%s/comm" % c).read().strip() == "sage-kcopy":
                        os.kill(int(c), 9)
                        os.waitpid(int(c), 0)
                except (OSError, ChildProcessError):
                    pass
            os._exit(os.waitstatus_to_exitcode(st) & 255)
        LIVE = nxt
os.close(SR)
name("sage-kernel")
CWD = os.getcwd()
COPIES = {}  # checkpoint id -> (pid, pipe to it)
def drop(keep):
    for cid in [c for c in COPIES if c not in keep]:
        pid, w = COPIES.pop(cid)
        try:
            os.write(w, b"{}\n")
        except OSError:
            pass
        os.close(w)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            # Not this kernel's child (an earlier one's): the supervisor
            # reaps it; wait until it is gone, a second at most.
            for _ in range(1000):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.001)
def hold(r):
    os.chdir("/")
    buf = b""
    while not buf.endswith(b"\n"):
        b = os.read(r, 65536)
        if not b:
            os._exit(0)
        buf += b
    msg = json.loads(buf)
    if not msg.get("go"):
        os._exit(0)
    return msg
def spawn():
    # Forks a copy of this state, named sage-kcopy from its first
    # instruction (the name is this process's at the fork). The parent
    # gets (pid, pipe to it); the copy blocks until it is resumed and gets
    # (0, 0, the message).
    r, w = os.pipe()
    name("sage-kcopy")
    pid = os.fork()
    if pid:
        name("sage-kernel")
        os.close(r)
        return pid, w, None
    os.close(w)
    msg = hold(r)
    os.close(r)
    return 0, 0, msg
def save(cid):
    # None in the kernel that checkpointed; in its copy, once resumed (by
    # a rollback), the rollback's message, after forking a fresh copy.
    msg = None
    while True:
        pid, w, m = spawn()
        if pid:
            COPIES[cid] = (pid, w)
            if msg is not None:
                drop(set(msg["keep"]) | {cid})
            return msg
        msg = m
def take(f):
    f.seek(0)
    b = f.read(LIMIT + 1)
    t = b[:LIMIT].decode("utf-8", "replace")
    if len(b) > LIMIT:
        t += "\n[... output truncated ...]\n"
    f.close()
    return t
def control(req, res):
    op, cid = req["op"], req.get("id", "")
    if op == "checkpoint":
        if not TEMPLATE:
            raise OSError("no fork template here (prctl PR_SET_CHILD_SUBREAPER failed)")
        drop({c for c in COPIES if c != cid})  # an id saved again (an agent turn that changed no file)
        msg = save(cid)
        if msg is not None:
            res["op"], res["id"] = "rollback", cid
        else:
            drop(set(req["keep"]))
    elif op == "rollback":
        if cid not in COPIES:
            raise KeyError("no copy of checkpoint " + cid)
        drop(set(req["keep"]) | {cid})
        pid, w = COPIES[cid]
        os.write(SW, ("%d %d\n" % (os.getpid(), pid)).encode())
        os.write(w, (json.dumps({"go": 1, "keep": req["keep"]}) + "\n").encode())
        os._exit(0)
    elif op == "drop":
        drop(set(req["keep"]))
    res["held"] = list(COPIES)
    res["pid"] = os.getpid()
count = 0
while True:
    h = I.readline()
    if not h:
        break
    req = json.loads(I.read(int(h)))
    if "op" in req:
        res = {"status": "ok", "execution_count": count}
        try:
            control(req, res)
        except Exception as e:
            res.update(status="error", ename=type(e).__name__, evalue=str(e))
        try:
            os.chdir(CWD)
        except OSError:
            pass
        P.write(json.dumps(res) + "\n")
        P.flush()
        continue
    count += 1
    res = {"status": "ok", "execution_count": count}
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    try:
        if req.get("cwd"):
            os.chdir(req["cwd"])
        else:
            os.chdir(CWD)
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
        try:
            CWD = os.getcwd()
        except OSError:
            pass
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
