// Ignores SIGTERM, SIGINT, SIGHUP and the end of its input; answers as the base does while it can.
// Writes its pid on stderr once it is ready, so a test knows the handlers are in place.
import { serve } from './base.mjs';

for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGPIPE']) process.on(sig, () => undefined);
serve({ keepOnEof: true });
setInterval(() => undefined, 60_000);
process.stderr.write(`ready ${process.pid}\n`);
