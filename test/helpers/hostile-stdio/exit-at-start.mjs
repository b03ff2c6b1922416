// Fails at once, as a server with a missing setting does: a reason on stderr, then exit code 2
// (or the signal named in argv[2]).
process.stderr.write('error: DATABASE_PATH is not set\n');
if (process.argv[2]) process.kill(process.pid, process.argv[2]);
else process.exit(2);
