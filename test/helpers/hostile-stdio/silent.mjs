// Reads everything and never answers; exits at end of input.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
