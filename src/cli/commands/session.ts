import type { Command } from 'commander';
import { VERSION } from '../../version.js';
import { DaemonClient, usage } from '../client.js';
import { LOCAL_LOGIN_HEADER } from '../../daemon-info.js';
import { clearCliSession, localLoginProof, storeCliSession } from '../credentials.js';
import { CliError } from '../errors.js';
import { type Output, printFields, printJson, when } from '../output.js';
import { readSecret } from '../prompt.js';

/**
 * What waits and what runs, as the logged-in user may see it: requests waiting for a decision,
 * active grants (an API key's grant counts as its key), and each provider's last discovery.
 */
async function overviewOf(client: DaemonClient) {
  type Row = { status: string; app_client_id: string };
  const [drafts, approved, providers, mcps] = await Promise.all([
    client.request<{ data: Row[] }>('GET', '/svc/v1/access-requests?status=draft'),
    client.request<{ data: Row[] }>('GET', '/svc/v1/access-requests?status=approved'),
    client.request<{ data: { name: string; discovered_at: string | null; discovery_error: string | null }[] }>('GET', '/svc/v1/providers').catch(() => ({ body: { data: [] } })),
    client.request<{ data: { processes?: { live: number } }[] }>('GET', '/svc/v1/mcps').catch(() => ({ body: { data: [] } })),
  ]);
  const keys = approved.body.data.filter((r) => r.app_client_id.startsWith('svc-key:')).length;
  return {
    requests_waiting: drafts.body.data.length,
    grants_active: approved.body.data.length - keys,
    keys_active: keys,
    // the processes of this user's command servers on the daemon that answered
    command_processes: mcps.body.data.reduce((n, m) => n + (m.processes?.live ?? 0), 0),
    providers: providers.body.data.map((p) => ({ name: p.name, discovered_at: p.discovered_at, discovery_error: p.discovery_error })),
  };
}

export function registerSession(program: Command, o: Output): void {
  program
    .command('status')
    .description('Is the daemon running, where, which version, and who the CLI is logged in as')
    .option('--json', 'machine-readable output')
    .option('--url', "print only the daemon's URL, where browsers and apps reach it (for scripts: SVC=$(svc status --url))")
    .addHelpText('after', '\nExamples:\n  $ svc status\n  $ svc status --json\n  $ curl -s "$(svc status --url)/svc/v1/health"\n')
    .action(async (opts: { json?: boolean; url?: boolean }, cmd: Command) => {
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      let health: { version?: string } | null = null;
      let user: { username: string; role: string } | null = null;
      try {
        health = (await client.request<{ version: string }>('GET', '/svc/v1/health', undefined, { auth: false })).body;
        user = (await client.request<{ user: { username: string; role: string } }>('GET', '/svc/v1/auth/me')).body.user;
      } catch {
        /* reported below */
      }
      const overview = user ? await overviewOf(client) : null;
      const status = {
        running: health !== null,
        url: health ? client.url : null,
        // where browsers and apps reach it: the --base-url, else where it listens
        base_url: health ? (client.info?.base_url ?? client.url) : null,
        data_dir: client.dataDir,
        daemon_version: health?.version ?? null,
        cli_version: VERSION,
        pid: health ? (client.info?.pid ?? null) : null,
        logged_in_as: user ? user.username : null,
        ...(overview ?? {}),
      };
      if (opts.url) {
        if (status.base_url) o.out(`${status.base_url}\n`);
      } else if (opts.json) printJson(o, status);
      else
        printFields(o, [
          ['running', status.running ? 'yes' : 'no (start it with `svc serve`)'],
          ['url', status.url ?? ''],
          ...(status.base_url && status.base_url !== status.url ? ([['base url', status.base_url]] as [string, unknown][]) : []),
          ['data dir', status.data_dir],
          ['version', status.daemon_version ?? `${VERSION} (cli)`],
          ['pid', status.pid ?? ''],
          ['logged in as', status.logged_in_as ?? (status.running ? 'nobody (run `svc login`)' : '')],
          ...(overview
            ? ([
                ['waiting', `${overview.requests_waiting} access request${overview.requests_waiting === 1 ? '' : 's'} (svc review)`],
                ['active', `${overview.grants_active} grant${overview.grants_active === 1 ? '' : 's'}, ${overview.keys_active} API key${overview.keys_active === 1 ? '' : 's'} (svc activity)`],
                ['command servers', `${overview.command_processes} process${overview.command_processes === 1 ? '' : 'es'} running`],
                ...overview.providers.map((p): [string, unknown] => [`provider ${p.name}`, p.discovery_error ? `discovery failed ${when(o, p.discovered_at)}: ${p.discovery_error}` : p.discovered_at ? `discovered ${when(o, p.discovered_at)}` : 'not discovered yet']),
              ] as [string, unknown][])
            : []),
        ]);
      // The hint also goes to stderr, so `--json` callers and scripts see it too.
      if (!status.running) throw new CliError(`No svc daemon runs for the data dir ${status.data_dir}. Start one with \`svc serve\`.`, 1);
    });

  program
    .command('login')
    .description("Log the CLI in to the daemon (the session is kept in the data dir, 0600, sealed)")
    .option('--username <name>', 'account name', 'admin')
    .option('--password-stdin', 'read the password from standard input')
    .addHelpText('after', '\nExamples:\n  $ svc login --username alice\n  $ printf %s "$PW" | svc login --username alice --password-stdin\n')
    .action(async (opts: { username: string; passwordStdin?: boolean }, cmd: Command) => {
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      if (!client.info) throw new CliError(`No svc daemon runs on ${client.dataDir}. Start one with \`svc serve\`.`);
      const password = await readSecret(opts.passwordStdin, `Password for ${opts.username}: `, '--password-stdin', o.stdin);
      if (!password) throw usage('An empty password was given.');
      // The proof that this CLI runs beside the data dir: its logins are never slowed by someone else's guesses.
      const proof = await localLoginProof(client.dataDir, client.info.key_backend);
      const res = await client.request<{ user: { username: string; role: string } }>('POST', '/svc/v1/auth/login', { username: opts.username, password }, { auth: false, headers: proof ? { [LOCAL_LOGIN_HEADER]: proof } : {} });
      const cookie = res.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .join('; ');
      await storeCliSession(client.dataDir, cookie, client.info.key_backend);
      o.err(`Logged in as ${res.body.user.username} (${res.body.user.role}).\n`);
    });

  program
    .command('logout')
    .description('End the CLI session')
    .addHelpText('after', '\nExamples:\n  $ svc logout\n  $ svc login --username alice   # then as someone else\n')
    .action(async (_opts, cmd: Command) => {
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      await client.request('POST', '/svc/v1/auth/logout').catch(() => undefined);
      await clearCliSession(client.dataDir);
      o.err('Logged out.\n');
    });
}
