import os from 'node:os';
import type { Command } from 'commander';
import { ConfigError, type MasterKeySource, resolveConfig } from '../../config.js';
import { CorruptStoreError, StoreUnavailableError } from '../../store/durable-file.js';
import { DataDirLockedError } from '../../store/lock.js';
import { MasterKeyError } from '../../store/master-key.js';
import { DatabaseUnavailableError, isDatabaseUrl, redactDatabaseUrl } from '../../store/postgres/url.js';
import { requireOwnDataDir, usage } from '../client.js';
import { CliError } from '../errors.js';
import type { Output } from '../output.js';

/** what `svc store copy` reports it moved, singular and plural, in the order it says them */
const LABELS: [string, string, string][] = [
  ['users', 'user', 'users'],
  ['sessions', 'session', 'sessions'],
  ['accessRequests', 'access request', 'access requests'],
  ['apiKeys', 'API key', 'API keys'],
  ['oauthClients', 'OAuth client', 'OAuth clients'],
  ['oauthState', 'stored grant or token', 'stored grants and tokens'],
  ['providers', 'provider', 'providers'],
  ['mcpInstances', 'MCP instance', 'MCP instances'],
  ['mcpTools', 'tool list', 'tool lists'],
  ['modelAliases', 'model alias', 'model aliases'],
  ['modelPulls', 'download', 'downloads'],
];

export function registerStore(program: Command, o: Output): void {
  const store = program
    .command('store')
    .description("Move svc's state between stores (a data dir's file store, a team's PostgreSQL)")
    .addHelpText(
      'after',
      `
Examples:
  $ svc store copy --to postgres://svc@db.internal/svc --master-key-file /etc/svc/master.key
  $ SVC_DATABASE_URL=postgres://svc:PW@db.internal/svc SVC_MASTER_KEY=... svc store copy --data-dir ~/.local/share/svc
`,
    );

  store
    .command('copy')
    .description("Copy a stopped daemon's data dir into a team's empty PostgreSQL database, sealing every secret again with the team's master key")
    .option('--to <url>', "the team's database, a postgres:// URL (env SVC_DATABASE_URL); it must hold no svc data yet")
    .option('--master-key-file <path>', "the file holding the team's master key, 32 bytes base64url (or env SVC_MASTER_KEY)")
    .action((opts: { to?: string; masterKeyFile?: string }, cmd: Command) => copyStore(o, opts, cmd));
}

interface CopySettings {
  dataDir: string;
  url: string;
  keySource: MasterKeySource;
}

/** The data dir, the database and where the team's key comes from; a missing or malformed one is a usage error. */
function copySettings(flags: Record<string, unknown>, env: NodeJS.ProcessEnv): CopySettings {
  const url = (flags.to as string | undefined) ?? (env.SVC_DATABASE_URL || undefined);
  if (!url) throw usage("svc store copy needs the team's database: --to postgres://USER@HOST/DB (or SVC_DATABASE_URL).");
  if (!isDatabaseUrl(url)) throw usage(`--to must be a postgres:// URL, not "${redactDatabaseUrl(url)}".`);
  let config;
  try {
    config = resolveConfig({ ...flags, database: url }, env);
  } catch (err) {
    if (err instanceof ConfigError) throw usage(err.message);
    throw err;
  }
  if (!config.masterKey) {
    throw usage(
      "svc store copy needs the team's master key, the one every replica is given: set SVC_MASTER_KEY (32 bytes, base64url) or give --master-key-file. " +
        'Generate one with `openssl rand -base64 32`.',
    );
  }
  return { dataDir: config.dataDir, url, keySource: config.masterKey };
}

/** `svc store copy`: everything in the data dir's store into the team's database, or nothing. */
async function copyStore(o: Output, opts: { to?: string; masterKeyFile?: string }, cmd: Command): Promise<void> {
  const { dataDir, url, keySource } = copySettings(cmd.optsWithGlobals(), o.env ?? process.env);
  await requireOwnDataDir(dataDir);
  // Loaded here: the store, the PostgreSQL client and the downloads' naming are not for every CLI start.
  const [{ osKeychain, teamMasterKey }, { copyDataDirToDatabase }, { openCopyTarget }, { replicaOf }] = await Promise.all([
    import('../../store/master-key.js'),
    import('../../store/copy.js'),
    import('../../store/postgres/copy-target.js'),
    import('../../models/downloads.js'),
  ]);
  let summary;
  try {
    const teamKey = await teamMasterKey(keySource);
    summary = await copyDataDirToDatabase({ dataDir, teamKey, keychain: osKeychain, replica: replicaOf(os.hostname(), dataDir), openTarget: () => openCopyTarget(url) });
  } catch (err) {
    throw await copyFailure(err, dataDir, redactDatabaseUrl(url));
  }
  const moved = LABELS.map(([key, one, many]) => [summary.counts[key as keyof typeof summary.counts], one, many] as const)
    .filter(([n]) => n > 0)
    .map(([n, one, many]) => `${n} ${n === 1 ? one : many}`);
  o.err(
    `Copied the store of ${dataDir} into ${summary.where}: ${moved.join(', ') || 'its settings only'}, with the signing and cookie keys; every secret is sealed with the team's master key.\n` +
      `Start the team on it with \`svc serve --database URL\` and the same master key. The data dir is left as it was: do not start its daemon on it again, or the two stores drift apart.\n`,
  );
}

/** The known failures as plain messages; each one means nothing was written. */
async function copyFailure(err: unknown, dataDir: string, where: string): Promise<unknown> {
  const { CopyError } = await import('../../store/copy.js');
  if (err instanceof DataDirLockedError) {
    const who = err.pid > 0 ? `pid ${err.pid}` : 'its pid not yet in daemon.lock';
    return new CliError(`A daemon (${who}) is using ${dataDir}. Stop it first (Ctrl-C where \`svc serve\` runs, or stop its service): svc store copy reads a stopped store. Nothing was written.`);
  }
  if (err instanceof CopyError || err instanceof MasterKeyError || err instanceof CorruptStoreError || err instanceof DatabaseUnavailableError) return new CliError(err.message);
  if (err instanceof StoreUnavailableError) {
    const cause = (err.cause as Error | undefined)?.message ?? 'no answer';
    return new CliError(`The copy into ${where} failed (${cause}); it is one transaction, so nothing of it was kept. Run it again once the database answers.`);
  }
  return err;
}
