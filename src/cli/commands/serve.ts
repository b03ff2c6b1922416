import type { Command } from 'commander';
import { ConfigError, resolveConfig } from '../../config.js';
import { UnsafeDataDirError } from '../../daemon-info.js';
import { AppError } from '../../errors.js';
import { CorruptStoreError, FileWriteError, StoreUnavailableError } from '../../store/durable-file.js';
import { DataDirLockedError } from '../../store/lock.js';
import { MasterKeyError } from '../../store/master-key.js';
import { DatabaseUnavailableError } from '../../store/postgres/url.js';
import { CliError } from '../errors.js';
import { type Output, setOutputClosedHandler } from '../output.js';

/** What a start that failed tells the user: the known causes as plain messages naming the file. */
function startupError(err: unknown, config: { host: string; port: number }): unknown {
  if (err instanceof UnsafeDataDirError || err instanceof DataDirLockedError || err instanceof CorruptStoreError || err instanceof MasterKeyError || err instanceof FileWriteError || err instanceof DatabaseUnavailableError) {
    return new CliError(err.message);
  }
  // A store write that failed during first-start setup: its cause names the file.
  if ((err instanceof StoreUnavailableError || (err instanceof AppError && err.code === 'store_unavailable')) && err.cause instanceof FileWriteError) return new CliError(err.cause.message);
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'EADDRINUSE') return new CliError(`Port ${config.port} on ${config.host} is in use; pick another with --port (0 picks a free one).`);
  if (e.code === 'EACCES') return new CliError(`Permission denied: ${e.message}`);
  if (e.code === 'ENOSPC') return new CliError(`The disk is full: ${e.message}`);
  return err;
}

export function registerServe(program: Command, o: Output): void {
  program
    .command('serve')
    .description('Run the svc daemon')
    .addHelpText(
      'after',
      `
Examples:
  $ svc serve                         # 127.0.0.1:7878, data in $XDG_DATA_HOME/svc
  $ svc serve --port 0                # any free port; the address is printed
  $ svc serve --data-dir /tmp/svc --base-url https://svc.example.test
  $ svc serve --database postgres://svc@db.internal/svc --master-key-file /etc/svc/master.key
`,
    )
    .option('--base-url <url>', 'public base URL used in review links (env SVC_BASE_URL)')
    .option('--rate-limit-client <n>', 'unauthenticated requests a minute per app_client_id, 0 = off (env SVC_RATE_LIMIT_CLIENT)')
    .option('--rate-limit-address <n>', 'unauthenticated requests a minute per address, 0 = off (env SVC_RATE_LIMIT_ADDRESS)')
    .option('--rate-limit-poll <n>', 'access-request polls a minute per address and request id, 0 = off (env SVC_RATE_LIMIT_POLL)')
    .option('--download-quota <size>', "disk each user's model downloads may take, e.g. 50GiB; 0 = no limit (env SVC_DOWNLOAD_QUOTA)")
    .option('--download-allow-networks <cidrs>', 'private networks that downloads started by apps may still reach, comma-separated (env SVC_DOWNLOAD_ALLOW_NETWORKS)')
    .option('--keychain <where>', 'where the master key lives for a new store: auto, keychain or file (env SVC_KEYCHAIN)')
    .option('--log-level <level>', 'trace, debug, info, warn, error (env SVC_LOG_LEVEL)')
    .option('--log-format <format>', 'human lines or json lines; auto: human on a terminal (env SVC_LOG_FORMAT)')
    .option('--issuer <url>', 'trust this external OAuth issuer instead of the embedded one (env SVC_ISSUER)')
    .option('--audience <aud>', 'the audience external tokens must carry; default the base URL (env SVC_AUDIENCE)')
    .option('--allow-jwt-typ', 'with --issuer: also accept access tokens with typ JWT (env SVC_ALLOW_JWT_TYP=1)')
    .option('--client-metadata-allow-loopback', 'fetch client metadata documents from loopback and private addresses too; for development (env SVC_CLIENT_METADATA_ALLOW_LOOPBACK=1)')
    .option('--rate-limit-registration <n>', 'dynamic client registrations a minute per address, 0 = off (env SVC_RATE_LIMIT_REGISTRATION)')
    .option('--dynamic-client-max <n>', 'most self-registered OAuth clients kept at once, 0 = no registration (env SVC_DYNAMIC_CLIENT_MAX)')
    .option('--dynamic-client-max-per-address <n>', 'most self-registered OAuth clients one address may hold, 0 = no per-address cap (env SVC_DYNAMIC_CLIENT_MAX_PER_ADDRESS)')
    .option('--request-retention-days <n>', 'remove expired, denied and failed access requests after n days, 0 = keep (env SVC_REQUEST_RETENTION_DAYS)')
    .option('--revoked-retention-days <n>', 'remove revoked access requests after n days, 0 = keep (env SVC_REVOKED_RETENTION_DAYS)')
    .option('--grant-concurrency <n>', 'upstream calls one grant may have in flight, 429 beyond, 0 = no limit (env SVC_GRANT_CONCURRENCY)')
    .option('--grant-streams <n>', 'MCP streams one grant may hold open, 429 beyond, 0 = no limit (env SVC_GRANT_STREAMS)')
    .option('--max-streams <n>', 'MCP streams the daemon holds open in all, 503 beyond, 0 = no cap (env SVC_MAX_STREAMS; default from the open-file limit)')
    .option('--stdio-idle-timeout <s>', 'end a command MCP server process idle this many seconds (env SVC_STDIO_IDLE_TIMEOUT; default 600)')
    .option('--stdio-max-processes <n>', 'command MCP server processes of one instance, 503 beyond (env SVC_STDIO_MAX_PROCESSES; default 16)')
    .option('--stdio-max-processes-total <n>', 'command MCP server processes in all, 503 beyond (env SVC_STDIO_MAX_PROCESSES_TOTAL; default 64)')
    .option('--activity-retention-days <n>', 'keep what apps did for n days, 0 = no age limit (env SVC_ACTIVITY_RETENTION_DAYS)')
    .option('--activity-max-events <n>', 'keep at most n activity events, the oldest go first (env SVC_ACTIVITY_MAX_EVENTS)')
    .option('--no-activity', 'record no activity: nothing of what apps do is kept, and per-day token limits count nothing (env SVC_ACTIVITY=0)')
    .option('--max-drafts-per-client <n>', 'undecided access requests per app_client_id, 429 beyond (env SVC_MAX_DRAFTS_PER_CLIENT)')
    .option('--max-drafts <n>', 'undecided access requests in all, 429 beyond (env SVC_MAX_DRAFTS)')
    .option('--dynamic-client-retention-days <n>', 'remove self-registered clients unused this many days, 0 = keep (env SVC_DYNAMIC_CLIENT_RETENTION_DAYS)')
    .option('--call-approval-timeout <s>', 'seconds a held tool call waits for your decision before the app is told nobody answered (env SVC_CALL_APPROVAL_TIMEOUT; default 55)')
    .option('--trust-proxy', 'behind a reverse proxy or load balancer that appends the client address to X-Forwarded-For: per-address limits count that address (env SVC_TRUST_PROXY=1)')
    .option('--no-notify', 'no desktop notifications of held tool calls and new access requests (env SVC_NOTIFY=0)')
    .option('--database <url>', "a team server: keep all state in PostgreSQL at this postgres:// URL, shared by every replica (env SVC_DATABASE_URL)")
    .option('--master-key-file <path>', "with --database: the file holding the team's master key, 32 bytes base64url, the same on every replica (or env SVC_MASTER_KEY)")
    .action(async (_opts, cmd: Command) => {
      const flags = cmd.optsWithGlobals();
      let config;
      try {
        config = resolveConfig(flags);
      } catch (err) {
        if (err instanceof ConfigError) throw new CliError(err.message, 2);
        throw err;
      }
      // From here on, every way of being told to stop leads to the same clean shutdown, at any
      // point of startup: SIGINT (also forwarded by npm, so it may come twice), SIGTERM, SIGHUP,
      // and a closed stdout or stderr (EPIPE: `svc serve | tee log` when Ctrl-C ends tee first).
      // A start that is stopped undoes what it did; a running daemon closes. Either way no
      // daemon.json or daemon.lock is left behind.
      const stopping = new AbortController();
      const stop = (reason: string) => {
        if (!stopping.signal.aborted) stopping.abort(reason);
      };
      const onSignal = (signal: NodeJS.Signals) => stop(signal);
      const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
      for (const sig of signals) process.on(sig, onSignal);
      setOutputClosedHandler(() => stop('EPIPE'));
      try {
        // Loaded here, not at the top: every other command starts without the whole server.
        const [{ startDaemon, StartupAbortedError }, { createLogger }] = await Promise.all([import('../../daemon.js'), import('../../log.js')]);
        // People at a terminal read lines; anything else (a pipe, a file, a supervisor) gets JSON.
        if (config.logFormat === 'auto') config.logFormat = process.stdout.isTTY ? 'human' : 'json';
        const logger = createLogger(config.logLevel, process.stderr, config.logFormat);
        // A notice counts as shown once written; a closed stdout (EPIPE, reported a tick later) means it was not.
        const notify = async (line: string) => {
          o.out(`${line}\n`);
          await new Promise((r) => setImmediate(r));
          if (stopping.signal.aborted) throw new StartupAbortedError();
        };
        let daemon;
        try {
          daemon = await startDaemon({ config, logger, notify, signal: stopping.signal });
        } catch (err) {
          if (stopping.signal.aborted) {
            logger.info({ reason: stopping.signal.reason }, 'stopped while starting');
            return;
          }
          throw startupError(err, config);
        }
        if (!stopping.signal.aborted) o.out(`svc listening on ${daemon.url} (data: ${config.dataDir})\n`);
        await new Promise<void>((resolve) => {
          if (stopping.signal.aborted) resolve();
          else stopping.signal.addEventListener('abort', () => resolve(), { once: true });
        });
        logger.info({ signal: stopping.signal.reason }, 'shutting down');
        await daemon.close();
      } finally {
        for (const sig of signals) process.off(sig, onSignal);
        setOutputClosedHandler(null);
      }
    });
}
