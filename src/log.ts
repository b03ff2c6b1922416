import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured logs. Secrets never reach the logger in the first place (we log ids, not bodies);
 * the redaction list is a second line of defence for the headers that carry credentials.
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { name: 'svc' },
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]', '*.password', '*.api_key', '*.token'],
        censor: '[redacted]',
      },
    },
    destination ?? process.stdout,
  );
}

/** Strips control characters so app-supplied strings cannot forge log lines or drive a terminal. */
export function inert(value: string, max = 200): string {
  // eslint-disable-next-line no-control-regex
  const clean = value.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, '\uFFFD');
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}
