import type { Command } from 'commander';
import { resolve } from '../ids.js';
import { DaemonClient } from '../client.js';
import { type Output, printFields, printJson, printRows, when } from '../output.js';
import type { z } from 'zod';
import type { oauthClient } from '../../oauth/clients.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type Client = z.infer<typeof oauthClient>;

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerClients(program: Command, o: Output): void {
  const clients = program
    .command('clients')
    .description("Manage the embedded authorization server's OAuth clients (admin)")
    .addHelpText(
      'after',
      `
Examples:
  $ svc clients add "Notes App" --redirect-uri http://127.0.0.1:5173/callback --description "Takes notes"
  $ svc clients add "CLI tool" --redirect-uri http://127.0.0.1:8976/cb --public
  $ svc clients list --json
  $ svc clients remove svc-3k...
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);

  clients
    .command('add <name>')
    .description('Register a client; prints its client_id (and, unless --public, its secret, once)')
    .requiredOption('--redirect-uri <uri>', 'an exact redirect URI (repeatable)', collect)
    .option('--description <text>', 'shown on the review page')
    .option('--public', 'a public client (no secret; PKCE only), e.g. a browser or native app')
    .option('--json', 'machine-readable output')
    .action(async (name: string, opts: { redirectUri: string[]; description?: string; public?: boolean; json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ client: Client; client_secret?: string }>('POST', '/admin/v1/clients', {
        name,
        redirect_uris: opts.redirectUri,
        ...(opts.description ? { description: opts.description } : {}),
        public: Boolean(opts.public),
      });
      // One flat object, as `svc keys create --json` answers: the record, and its secret once.
      if (opts.json) return printJson(o, { ...body.client, ...(body.client_secret ? { client_secret: body.client_secret } : {}) });
      if (!o.isTTY) {
        // `ID=$(svc clients add ...)`: stdout is the client id alone; the secret still reaches the person, once
        o.out(`${body.client.client_id}\n`);
        if (body.client_secret) o.err(`client_secret: ${body.client_secret}\nThe secret is shown only now; keep it with the app (--json gives both to a script).\n`);
        return;
      }
      printFields(o, [['client_id', body.client.client_id], ...(body.client_secret ? ([['client_secret', body.client_secret]] as [string, unknown][]) : [])]);
      if (body.client_secret) o.err('The secret is shown only now; keep it with the app.\n');
    });

  clients
    .command('list')
    .description('List OAuth clients: those an admin added, and those that registered themselves (MCP hosts)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ data: Client[] }>('GET', '/admin/v1/clients');
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        { header: 'client id', value: (c) => c.client_id, copy: true },
        { header: 'name', value: (c) => c.name },
        { header: 'type', value: (c) => (c.public ? 'public' : 'confidential') },
        { header: 'registered', value: (c) => (c.kind === 'dynamic' ? `by itself, used ${c.last_used_at ? when(o, c.last_used_at) : 'never'}` : 'by admin') },
        { header: 'redirect uris', value: (c) => c.redirect_uris.join(' ') },
      ]);
    });

  clients
    .command('remove <client_id>')
    .description("Remove a client; its grants are revoked and its pending requests fail")
    .action(async (typed: string, _opts, cmd: Command) => {
      const client = await connect(cmd);
      const clientId = await resolve(client, 'client', typed);
      await client.request('DELETE', `/admin/v1/clients/${encodeURIComponent(clientId)}`);
      o.err(`Removed ${clientId}.\n`);
    });
}
