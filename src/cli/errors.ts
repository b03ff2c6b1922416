import { AppError } from '../errors.js';

/** Stable exit codes (decisions: Review surfaces): scripts switch on them. */
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

/**
 * A hint names another action than the one that failed: `svc login` failing is not told to run
 * `svc login` (`command` is the verb path that ran, e.g. "login" or "requests approve").
 */
export function hintFor(err: AppError, command = ''): string | undefined {
  if (err.code === 'invalid_credentials') return command === 'login' ? 'check the username and password' : 'run `svc login`';
  if (err.code === 'login_required') return command === 'login' ? undefined : 'run `svc login`';
  // Not a matter of rights: an instance named for a URL it does not serve, or someone else's.
  if (err.code === 'mcp_instance_not_owned') return '`svc mcp list` shows your instances, with the URL each one serves';
  if (err.status === 403) return 'your account is not allowed to do this';
  return undefined;
}
