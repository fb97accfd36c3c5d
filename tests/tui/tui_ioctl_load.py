"""A process that issues ioctls (TIOCGWINSZ on a pty) for N seconds: a syscall-tracepoint target."""
import fcntl
import os
import sys
import termios
import time

m, s = os.openpty()
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    for _ in range(200):
        fcntl.ioctl(s, termios.TIOCGWINSZ, b"\0" * 8)
    n += 200
    time.sleep(0.01)
print(n)
