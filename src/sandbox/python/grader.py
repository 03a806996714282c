# The trusted side of a sandboxed run, and the sandbox's first process: it applies the resource limits (inherited by
# everything it starts), makes itself undumpable (so the code's process, the same user, can neither trace it nor read
# its memory or descriptors through /proc), checks the code's syntax, splits each test, starts the code's own process
# (candidate.py) and judges what comes back. A test `assert <expr>` is split when every call of the entry point in it
# is evaluated unconditionally and takes arguments that hold no such call: the arguments are evaluated here and sent
# as plain values, the code's process sends the return values back as plain values, and the rest of the expression
# runs here, on genuine builtins and modules. Any other test runs in the code's process as before and is reported as
# in-process (its verdict could be forged). The grader reports one JSON line per event on fd 3, flushed as it goes.
# The request comes on stdin: {"code", "tests", "entryPoint" (or null), "testSetup", "testTimeout" (s), "maxTimeouts",
# "limits", "candidate" (the code's program)}.
# programs.ts runs this after codec.py (encode, decode, load_plain_json) and timer.py (timed, TestTimeout, describe),
# as one program.
import ast, builtins, ctypes, json, math, os, resource, signal, subprocess, sys

request = json.loads(sys.stdin.read())
for name, value in request["limits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))
PR_SET_DUMPABLE = 4
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")

report = os.fdopen(3, "w", buffering=1)
def emit(**event):
    report.write(json.dumps(event) + "\n")

# The largest result line read from the code's process: 4 MiB of plain values, with room for the framing.
LINE_LIMIT = (1 << 22) + 4096

code = request["code"]
try:
    compile(code, "<solution>", "exec")
except SyntaxError as error:
    emit(kind="syntax", ok=False, line=error.lineno, offset=error.offset, message=str(error.msg))
    sys.exit(0)
except ValueError as error:
    emit(kind="syntax", ok=False, line=None, offset=None, message=str(error))
    sys.exit(0)
emit(kind="syntax", ok=True)

# The namespace the split asserts run in: genuine builtins, math and the problem's imports, never the code.
trusted = {"__builtins__": builtins, "math": math}
exec(request["testSetup"], trusted)
entry = request["entryPoint"]
RESULT = "__candidate_result_%d"

class Splitter(ast.NodeTransformer):
    """Replaces each call of the entry point with a result name; ok turns False where the test cannot be split."""

    def __init__(self):
        self.calls = []
        self.conditional = 0
        self.ok = True

    def visit_Call(self, node):
        if not (isinstance(node.func, ast.Name) and node.func.id == entry):
            return self.generic_visit(node)
        if self.conditional or any(self.mentions_entry(part) for part in node.args + node.keywords):
            self.ok = False
            return node
        self.calls.append(node)
        return ast.copy_location(ast.Name(RESULT % (len(self.calls) - 1), ast.Load()), node)

    def visit_Name(self, node):
        # The entry point used other than by a call, or a name that would collide with a result.
        if node.id == entry or node.id.startswith("__candidate_result_"):
            self.ok = False
        return node

    def mentions_entry(self, node):
        return any(isinstance(n, ast.Name) and n.id == entry for n in ast.walk(node))

    def conditionally(self, node, visit=None):
        self.conditional += 1
        try:
            return (visit or self.visit)(node)
        finally:
            self.conditional -= 1

    # Parts that may be evaluated once, never or many times: a call there cannot be replaced by one result.
    def visit_BoolOp(self, node):
        node.values = [self.visit(node.values[0])] + [self.conditionally(v) for v in node.values[1:]]
        return node

    def visit_IfExp(self, node):
        node.test = self.visit(node.test)
        node.body, node.orelse = self.conditionally(node.body), self.conditionally(node.orelse)
        return node

    def visit_Compare(self, node):
        node.left = self.visit(node.left)
        node.comparators = [self.visit(node.comparators[0])] + [self.conditionally(c) for c in node.comparators[1:]]
        return node

    def visit_Lambda(self, node):
        return self.conditionally(node, self.generic_visit)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda

def resolvable_here(expression):
    """Whether every free name of the expression exists here: a test naming the code's own helpers runs in-process."""
    nodes = list(ast.walk(expression))
    bound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {a.arg for n in nodes if isinstance(n, ast.arguments) for a in n.posonlyargs + n.args + n.kwonlyargs + [n.vararg, n.kwarg] if a is not None}
    free = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound
    return all(name.startswith("__candidate_result_") or name in trusted or hasattr(builtins, name) for name in free)

def collect(*args, **kwargs):
    return list(args), kwargs

def split(test):
    """(encoded calls, check, message) for a test that can be split, else None."""
    if entry is None:
        return None
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return None
    statement = tree.body[0]
    splitter = Splitter()
    check = splitter.visit(statement.test)
    if statement.msg is not None:
        splitter.conditionally(statement.msg)
    if not splitter.ok or not resolvable_here(check):
        return None
    calls = []
    try:
        for call in splitter.calls:
            collector = ast.Call(ast.Name("__collect", ast.Load()), call.args, call.keywords)
            expression = ast.fix_missing_locations(ast.Expression(ast.copy_location(collector, call)))
            args, kwargs = timed(request["testTimeout"], lambda: eval(compile(expression, "<test>", "eval"), dict(trusted, __collect=collect)))
            calls.append([encode(args), encode(kwargs)])
    except BaseException:
        # Arguments that fail here or are not plain values: the test runs in-process, where they may still work.
        return None
    return calls, expression_code(check), None if statement.msg is None else expression_code(statement.msg)

def expression_code(node):
    return compile(ast.fix_missing_locations(ast.Expression(node)), "<test>", "eval")

def judge(index, plan, values):
    _, check, message = plan
    scope = dict(trusted)
    scope.update((RESULT % i, value) for i, value in enumerate(values))
    def run():
        if not eval(check, scope):
            raise AssertionError(eval(message, scope)) if message is not None else AssertionError()
    try:
        timed(request["testTimeout"], run)
        emit(kind="test", index=index, status="pass", inProcess=False)
    except TestTimeout:
        emit(kind="test", index=index, status="timeout", errorType="Timeout", message="checking the results timed out", inProcess=False)
    except BaseException as error:
        emit(kind="test", index=index, status="fail", inProcess=False, **describe(error))

tests = request["tests"]
plans = [split(test) for test in tests]

read_end, write_end = os.pipe()
candidate = subprocess.Popen(
    [sys.executable, "-I", "-c", request["candidate"], str(write_end)],
    stdin=subprocess.PIPE, pass_fds=(write_end,), close_fds=True,
)
os.close(write_end)
try:
    candidate.stdin.write(json.dumps({
        "code": code,
        "entryPoint": entry,
        "tests": [{"source": test} if plan is None else {"calls": plan[0]} for test, plan in zip(tests, plans)],
        "testTimeout": request["testTimeout"],
        "maxTimeouts": request["maxTimeouts"],
    }).encode())
    candidate.stdin.close()
except BrokenPipeError:
    pass

def refuse(index, message):
    emit(kind="test", index=index, status="fail", errorType="InvalidResult", message=message, inProcess=plans[index] is None)

loaded = None
decided = set()
results = os.fdopen(read_end, "rb")
while len(decided) < len(tests) or loaded is None:
    line = results.readline(LINE_LIMIT + 1)
    if not line:
        break
    if len(line) > LINE_LIMIT:
        candidate.kill()
        break
    try:
        event = load_plain_json(line)
    except ValueError:
        continue
    if type(event) is not dict:
        continue
    if event.get("kind") == "load" and loaded is None:
        loaded = event.get("ok") is True
        if not loaded:
            emit(kind="load", ok=False, errorType=str(event.get("errorType"))[:100], message=str(event.get("message"))[:500])
            break
        emit(kind="load", ok=True)
        continue
    index = event.get("index")
    if event.get("kind") != "test" or not loaded or type(index) is not int or not 0 <= index < len(tests) or index in decided:
        continue
    decided.add(index)
    status, plan = event.get("status"), plans[index]
    if status == "returned" and plan is not None:
        try:
            values = decode(event.get("values"))
            if type(values) is not list or len(values) != len(plan[0]):
                raise ValueError("expected %d results" % len(plan[0]))
        except BaseException as error:
            refuse(index, "the code's process sent results that are not plain values: %s" % str(error)[:300])
            continue
        judge(index, plan, values)
    elif status == "pass" and plan is None:
        emit(kind="test", index=index, status="pass", inProcess=True)
    elif status in ("fail", "timeout", "skipped"):
        emit(kind="test", index=index, status=status, errorType=str(event.get("errorType"))[:100], message=str(event.get("message"))[:500], inProcess=plan is None)
    else:
        refuse(index, "the code's process reported %.40r for a test it does not judge" % (status,))

# The code's process is done with (or gave up on) every test: it may not outlive the report.
if candidate.poll() is None:
    candidate.kill()
status = candidate.wait()
if status < 0 and (len(decided) < len(tests) or loaded is None):
    # Ended by a signal (a limit, the kernel) before reporting: end the same way, so the sandbox's exit says why.
    if -status not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status if status > 0 and len(decided) < len(tests) else 0)
