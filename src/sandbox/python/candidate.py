# The program that runs the model's code, started by the grader (grader.py) inside the sandbox. It holds no reporting
# channel, no expected values and nothing of the grader: its request (on stdin) is the code, and per test either the
# entry point's argument lists (plain values) or, for a test the grader could not split, the test's source. It
# writes one JSON line per event on the descriptor named by its first argument: the load's outcome, then per test the
# encoded return values (the grader judges them), or the test's own outcome for an in-process test, or the error,
# timeout or skip. Whatever it writes there is data the grader checks, never a verdict it takes on trust.
# The request: {"code", "entryPoint", "tests": [{"calls": [[args, kwargs], ...]} | {"source"}], "testTimeout" (s), "maxTimeouts"}.
# programs.ts runs this after codec.py (encode, decode) and timer.py (timed, TestTimeout, describe), as one program.
import builtins, json, math, os, signal, sys

channel = os.fdopen(int(sys.argv[1]), "w", buffering=1)
request = json.loads(sys.stdin.read())

# A result line larger than this is refused here; the grader refuses it too, whatever this process claims.
RESULT_LIMIT = 1 << 22

def send(**event):
    channel.write(json.dumps(event) + "\n")

namespace = {"__name__": "solution", "__builtins__": builtins, "math": math}
try:
    compiled = compile(request["code"], "<solution>", "exec")
    timed(request["testTimeout"], lambda: exec(compiled, namespace))
except TestTimeout:
    send(kind="load", ok=False, errorType="Timeout", message="loading the code timed out")
    sys.exit(0)
except BaseException as error:
    send(kind="load", ok=False, **describe(error))
    sys.exit(0)
send(kind="load", ok=True)

def call_all(calls, values):
    entry = request["entryPoint"]
    for args, kwargs in calls:
        if entry not in namespace:
            raise NameError("name %r is not defined" % entry)
        values.append(encode(namespace[entry](*decode(args), **decode(kwargs))))

timeouts = 0
for index, test in enumerate(request["tests"]):
    if timeouts >= request["maxTimeouts"]:
        send(kind="test", index=index, status="skipped", errorType="Skipped", message="too many timeouts before this test")
        continue
    try:
        if "source" in test:
            timed(request["testTimeout"], lambda: exec(test["source"], namespace))
            send(kind="test", index=index, status="pass")
            continue
        values = []
        timed(request["testTimeout"], lambda: call_all(test["calls"], values))
        line = json.dumps(values)
        if len(line) > RESULT_LIMIT:
            raise ValueError("the results take %d bytes as plain values, more than %d" % (len(line), RESULT_LIMIT))
        send(kind="test", index=index, status="returned", values=values)
    except TestTimeout:
        timeouts += 1
        send(kind="test", index=index, status="timeout", errorType="Timeout", message="test execution timed out")
    except BaseException as error:
        send(kind="test", index=index, status="fail", **describe(error))
