# Shared by grader.py and candidate.py (programs.ts puts it ahead of each): a timer that interrupts what runs under it
# (SIGALRM raises TestTimeout, a BaseException, so only code that catches everything can swallow it; the wall clock
# ends that), and the error description both report.
import signal

class TestTimeout(BaseException):
    pass

def on_alarm(signum, frame):
    raise TestTimeout()

signal.signal(signal.SIGALRM, on_alarm)

def timed(seconds, run):
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

def describe(error):
    return {"errorType": type(error).__name__, "message": str(error)[:500]}
