/**
 * The database URL as svc names it in messages and logs: never with its password. Apart from the
 * client, so that reading the configuration does not load `pg`.
 */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const name of [...u.searchParams.keys()]) if (/pass|secret|key/i.test(name)) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return 'the database URL (unreadable)';
  }
}

/** What `--database` accepts: a postgres:// (or postgresql://) URL naming a host. */
export function isDatabaseUrl(url: string): boolean {
  try {
    const u = new URL(url);
    return (u.protocol === 'postgres:' || u.protocol === 'postgresql:') && u.hostname !== '';
  } catch {
    return false;
  }
}

/** The team store could not be opened at start: the database unreachable, refusing svc, or too new. */
export class DatabaseUnavailableError extends Error {
  constructor(where: string, reason: string) {
    super(`Cannot use the database at ${where}: ${reason}`);
    this.name = 'DatabaseUnavailableError';
  }
}
