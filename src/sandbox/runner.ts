// The Python program that runs inside the sandbox: it applies the resource limits to itself (so they hold for
// everything it starts), checks the code's syntax, loads it, then runs each test under its own timer. It reports one
// JSON line per event on fd 3, so nothing the code prints on stdout or stderr can be taken for a result; lines are
// flushed as they happen, so a run killed from outside still leaves the results of the tests it finished.
// The request comes on stdin: {"code", "tests", "testTimeout" (seconds), "maxTimeouts", "limits"}.
export const RUNNER_SOURCE = String.raw`
import builtins, json, math, os, resource, signal, sys

request = json.loads(sys.stdin.read())
for name, value in request["limits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))

report = os.fdopen(3, "w", buffering=1)
def emit(**event):
    report.write(json.dumps(event) + "\n")

class TestTimeout(BaseException):
    pass

def on_alarm(signum, frame):
    raise TestTimeout()

signal.signal(signal.SIGALRM, on_alarm)

def timed(seconds, run):
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

def describe(error):
    return {"errorType": type(error).__name__, "message": str(error)[:500]}

code = request["code"]
try:
    compiled = compile(code, "<solution>", "exec")
except SyntaxError as error:
    emit(kind="syntax", ok=False, line=error.lineno, offset=error.offset, message=str(error.msg))
    sys.exit(0)
emit(kind="syntax", ok=True)

namespace = {"__name__": "solution", "__builtins__": builtins, "math": math}
try:
    timed(request["testTimeout"], lambda: exec(compiled, namespace))
except TestTimeout:
    emit(kind="load", ok=False, errorType="Timeout", message="loading the code timed out")
    sys.exit(0)
except BaseException as error:
    emit(kind="load", ok=False, **describe(error))
    sys.exit(0)
emit(kind="load", ok=True)

timeouts = 0
for index, test in enumerate(request["tests"]):
    if timeouts >= request["maxTimeouts"]:
        emit(kind="test", index=index, status="skipped", errorType="Skipped", message="too many timeouts before this test")
        continue
    try:
        timed(request["testTimeout"], lambda: exec(test, namespace))
        emit(kind="test", index=index, status="pass")
    except TestTimeout:
        timeouts += 1
        emit(kind="test", index=index, status="timeout", errorType="Timeout", message="test execution timed out")
    except BaseException as error:
        emit(kind="test", index=index, status="fail", **describe(error))
`;
