import { AppError } from '../errors.js';

/** Stable exit codes (CONTRACT §10): scripts switch on them. */
export const EXIT = { ok: 0, error: 1, usage: 2, auth: 4 } as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.error,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** The same AppError the daemon answers with decides the exit code and the hint. */
export function exitCodeFor(err: AppError): number {
  return err.status === 401 || err.status === 403 ? EXIT.auth : EXIT.error;
}

export function hintFor(err: AppError): string | undefined {
  if (err.code === 'login_required' || err.code === 'invalid_credentials') return 'run `svc login`';
  if (err.status === 403) return 'your account is not allowed to do this';
  return undefined;
}
