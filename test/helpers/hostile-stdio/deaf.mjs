// Never reads its stdin (nor notices it closing): what svc sends it piles up in the pipe.
process.stdin.pause();
setInterval(() => undefined, 60_000);
process.stderr.write('deaf\n');
