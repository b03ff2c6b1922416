import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured logs. Secrets never reach the logger in the first place (we log ids, not bodies);
 * the redaction list is a second line of defence for the headers that carry credentials.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream, format: 'human' | 'json' = 'json'): Logger {
  const out = destination ?? process.stdout;
  return pino(
    {
      level,
      base: { name: 'svc' },
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]', '*.password', '*.api_key', '*.token'],
        censor: '[redacted]',
      },
    },
    format === 'human' ? humanLines(out) : out,
  );
}

const LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const SKIPPED = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'requestId']);

/**
 * Log lines for a person at a terminal: `12:01:02 GET /v1/models 200 3 ms` for a request, and
 * `12:01:02 warn message key=value` otherwise. The listening line is the serve command's own.
 */
export function humanLines(out: NodeJS.WritableStream): NodeJS.WritableStream {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (!text) continue;
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(text) as Record<string, unknown>;
        } catch {
          out.write(`${text}\n`);
          continue;
        }
        if (entry.msg === 'svc listening') continue;
        const time = new Date(Number(entry.time)).toTimeString().slice(0, 8);
        if (entry.msg === 'request') {
          out.write(`${time} ${entry.method} ${inert(String(entry.path ?? ''), 120)} ${entry.status} ${entry.ms} ms\n`);
          continue;
        }
        const level = LEVELS[Number(entry.level)] ?? '';
        const fields = Object.entries(entry)
          .filter(([k]) => !SKIPPED.has(k))
          .map(([k, v]) => `${k}=${inert(typeof v === 'string' ? v : JSON.stringify(v), 120)}`);
        out.write(`${time} ${level === 'info' ? '' : `${level} `}${inert(String(entry.msg ?? ''), 300)}${fields.length ? ` ${fields.join(' ')}` : ''}\n`);
      }
      done();
    },
  });
}

/**
 * What never reaches a log line or a terminal from an app-supplied string: control characters
 * (C0, DEL, C1), line and paragraph separators, and invisible format characters that let text
 * pose as other text: bidi overrides and isolates, zero-width spaces and joiners, the BOM, Unicode
 * tag characters (U+E0000-U+E007F), lone surrogates and the invisible Hangul fillers.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u{E0000}-\u{E007F}\u034f\u115f\u1160\u3164\uffa0]/gu;

/** Strips control and invisible characters so app-supplied strings cannot forge log lines or drive a terminal. */
export function inert(value: string, max = 200): string {
  const clean = value.replace(UNSAFE, '\uFFFD');
  if (clean.length <= max) return clean;
  // never cut a surrogate pair in half (that would be a lone surrogate again)
  const cut = /[\ud800-\udbff]/.test(clean[max - 1] ?? '') ? max - 1 : max;
  return `${clean.slice(0, cut)}…`;
}
