import { type Command, Option } from 'commander';
import { userRoles } from '../../store/vocabulary.js';
import { ConfigError, resolveConfig } from '../../config.js';
import { AppError } from '../../errors.js';
import { CorruptStoreError, FileWriteError, StoreUnavailableError } from '../../store/durable-file.js';
import { DataDirLockedError } from '../../store/lock.js';
import { MasterKeyError } from '../../store/master-key.js';
import { DaemonClient, requireOwnDataDir, usage } from '../client.js';
import { CliError } from '../errors.js';
import { type Output, printJson, printRows, when } from '../output.js';
import { readSecret } from '../prompt.js';
import type { z } from 'zod';
import type { publicUser } from '../../auth/schemas.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type PublicUser = z.infer<typeof publicUser> & { created_at?: string };

export function registerUsers(program: Command, o: Output): void {
  const users = program
    .command('users')
    .description('Manage local accounts (manager or admin)')
    .addHelpText(
      'after',
      `
Examples:
  $ printf %s "$PW" | svc users add alice --role power_user --password-stdin
  $ svc users list --json
  $ svc users set-role alice user
  $ printf %s "$NEW_PW" | svc users passwd alice --password-stdin
  $ svc users passwd admin --offline   # with the daemon stopped: needs the data dir and its master key
  $ svc users remove alice
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
  const enc = encodeURIComponent;

  users
    .command('add <name>')
    .description('Create an account')
    .addOption(new Option('--role <role>', 'role').choices([...userRoles]).default('user'))
    .option('--password-stdin', 'read the password from standard input')
    .action(async (name: string, opts: { role: string; passwordStdin?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const password = await readSecret(opts.passwordStdin, `Password for ${name}: `, '--password-stdin', o.stdin);
      const { body } = await client.request<{ user: PublicUser }>('POST', '/svc/v1/users', { username: name, role: opts.role, password });
      o.err(`Created ${body.user.username} (${body.user.role}).\n`);
    });

  users
    .command('list')
    .description('List accounts')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ data: PublicUser[] }>('GET', '/svc/v1/users');
      if (opts.json) printJson(o, body.data);
      else printRows(o, body.data, [
        { header: 'username', value: (u) => u.username, copy: true },
        { header: 'role', value: (u) => u.role },
        { header: 'id', value: (u) => u.id, copy: true },
        { header: 'created', value: (u) => when(o, u.created_at) },
      ]);
    });

  users
    .command('set-role <name> <role>')
    .description("Change an account's role (user, power_user, manager, admin)")
    .action(async (name: string, role: string, _opts, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ user: PublicUser }>('PUT', `/svc/v1/users/${enc(name)}/role`, { role });
      o.err(`${body.user.username} is now ${body.user.role}.\n`);
    });

  users
    .command('passwd <name>')
    .description("Set an account's password (ends that account's sessions)")
    .option('--password-stdin', 'read the password from standard input')
    .option('--offline', 'with no daemon running: change the store directly (needs the data dir and its master key)')
    .action(async (name: string, opts: { passwordStdin?: boolean; offline?: boolean }, cmd: Command) => {
      if (opts.offline) return passwdOffline(o, name, opts, cmd);
      const client = await connect(cmd);
      const password = await readSecret(opts.passwordStdin, `New password for ${name}: `, '--password-stdin', o.stdin);
      await client.request('PUT', `/svc/v1/users/${enc(name)}/password`, { password });
      o.err(`Password of ${name} changed; that account's sessions have ended (if it is yours, run \`svc login\` again).\n`);
    });

  users
    .command('remove <name>')
    .description('Remove an account; its MCP instances go and the grants it approved are revoked')
    .action(async (name: string, _opts, cmd: Command) => {
      await (await connect(cmd)).request('DELETE', `/svc/v1/users/${enc(name)}`);
      o.err(`Removed ${name}.\n`);
    });
}

/** `svc users passwd NAME --offline`: no daemon, the store itself, under the data dir's lock. */
async function passwdOffline(o: Output, name: string, opts: { passwordStdin?: boolean }, cmd: Command): Promise<void> {
  let dataDir: string;
  try {
    dataDir = resolveConfig(cmd.optsWithGlobals(), o.env).dataDir;
  } catch (err) {
    if (err instanceof ConfigError) throw usage(err.message);
    throw err;
  }
  await requireOwnDataDir(dataDir);
  const password = await readSecret(opts.passwordStdin, `New password for ${name}: `, '--password-stdin', o.stdin);
  // zod is loaded here, not at every CLI start
  const { passwordSchema } = await import('../../auth/schemas.js');
  const checked = passwordSchema.safeParse(password);
  if (!checked.success) throw usage(`The password is not accepted: ${checked.error.issues[0].message}.`);
  // Loaded here: the store and password hashing are not for every CLI start.
  const { OfflineError, setPasswordOffline } = await import('../../auth/offline.js');
  try {
    await setPasswordOffline({ dataDir, username: name, password });
  } catch (err) {
    if (err instanceof DataDirLockedError) {
      throw new CliError(`A daemon (pid ${err.pid}) is using ${dataDir}. Stop it first, or change the password through it: svc users passwd ${name}`);
    }
    if (err instanceof CorruptStoreError || err instanceof MasterKeyError || err instanceof OfflineError || err instanceof FileWriteError) {
      throw new CliError((err as Error).message);
    }
    if ((err instanceof AppError || err instanceof StoreUnavailableError) && err.cause instanceof FileWriteError) throw new CliError(err.cause.message);
    throw err;
  }
  o.err(`Password of ${name} set in ${dataDir}; that account's sessions have ended. Start svc and log in (\`svc login\`).\n`);
}
