// Answers as the base does; on `count` it writes many stderr lines that quote its SECRET_TOKEN
// variable, one line far over any cap with the secret astride the cap, and control characters.
import { serve } from './base.mjs';

const secret = process.env.SECRET_TOKEN ?? '';
const lines = Number(process.argv[2] ?? 500);
serve({
  onCall: () => {
    let out = '';
    for (let i = 0; i < lines; i++) out += `line ${i} token=${secret} \u001b[31mred\u001b[0m\n`;
    out += `${'y'.repeat(4096 - 10)}${secret}${'z'.repeat(10_000)}\n`;
    process.stderr.write(out);
    return undefined;
  },
});
