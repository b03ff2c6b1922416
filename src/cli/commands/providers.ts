import type { Command } from 'commander';
import { DaemonClient, usage } from '../client.js';
import { CliError } from '../errors.js';
import { type Output, printJson, printRows } from '../output.js';
import { secretFromStdin } from '../prompt.js';
import type { z } from 'zod';
import type { provider } from '../../providers/schemas.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type Provider = z.infer<typeof provider>;

export function registerProviders(program: Command, o: Output): void {
  const providers = program
    .command('providers')
    .description('Upstream OpenAI-compatible model servers (power user and above)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc providers add ollama --base-url http://127.0.0.1:11434/v1
  $ printf %s "$OPENAI_API_KEY" | svc providers add openai --base-url https://api.openai.com/v1 --api-key-stdin --models gpt-4o-mini
  $ printf %s "$ANTHROPIC_API_KEY" | svc providers add anthropic --base-url https://api.anthropic.com/v1 --api messages --api-key-stdin
  $ svc providers list
  $ svc providers refresh ollama
  $ svc providers remove ollama
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);

  providers
    .command('add <name>')
    .description("Add a provider; its models are discovered from its GET /models")
    .requiredOption('--base-url <url>', 'OpenAI-compatible base URL (ending in /v1 for most servers)')
    .option('--api-key-stdin', 'read the API key from standard input (stored encrypted, never shown)')
    .option('--models <a,b>', 'models to offer even if the provider does not list them')
    .option('--timeout-ms <ms>', 'upstream inactivity timeout (default 120000)')
    .option('--api <api>', "how apps' /v1/messages calls reach it: chat (translated onto /chat/completions, the default) or messages (passed through to its /messages)")
    .option('--auth-header <header>', 'a messages provider: send its key in x-api-key (the default) or authorization (Bearer)')
    .option('--json', 'machine-readable output')
    .action(async (name: string, opts: { baseUrl: string; apiKeyStdin?: boolean; models?: string; timeoutMs?: string; api?: string; authHeader?: string; json?: boolean }, cmd: Command) => {
      const apiKey = opts.apiKeyStdin ? await secretFromStdin(o.stdin) : undefined;
      if (opts.apiKeyStdin && !apiKey) throw usage('--api-key-stdin read an empty key.');
      const timeout = opts.timeoutMs === undefined ? undefined : Number(opts.timeoutMs);
      if (timeout !== undefined && !Number.isInteger(timeout)) throw usage('--timeout-ms takes a whole number.');
      const { body } = await (await connect(cmd)).request<{ provider: Provider }>('POST', '/svc/v1/providers', {
        name,
        base_url: opts.baseUrl,
        ...(apiKey ? { api_key: apiKey } : {}),
        ...(opts.models ? { models: opts.models.split(',').map((m) => m.trim()).filter(Boolean) } : {}),
        ...(timeout !== undefined ? { timeout_ms: timeout } : {}),
        ...(opts.api !== undefined ? { api: opts.api } : {}),
        ...(opts.authHeader !== undefined ? { auth_header: opts.authHeader.toLowerCase() } : {}),
      });
      if (opts.json) return printJson(o, body.provider);
      const p = body.provider;
      o.err(`Added ${p.name}: ${p.discovered_models.length} models discovered${p.discovery_error ? ` (discovery failed: ${p.discovery_error})` : ''}.\n`);
    });

  providers
    .command('list')
    .description('List providers (keys are never shown)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ data: Provider[] }>('GET', '/svc/v1/providers');
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        { header: 'name', value: (p) => p.name, copy: true },
        { header: 'base url', value: (p) => p.base_url, copy: true },
        { header: 'key', value: (p) => (p.has_api_key ? 'yes' : 'no') },
        { header: 'models', value: (p) => [...new Set([...p.models, ...p.discovered_models])].join(',') },
        { header: 'discovery', value: (p) => p.discovery_error ?? 'ok' },
      ]);
    });

  providers
    .command('refresh <name>')
    .description("Ask the provider for its models again")
    .option('--json', 'machine-readable output (the provider, discovery_error included)')
    .action(async (name: string, opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ provider: Provider }>('POST', `/svc/v1/providers/${encodeURIComponent(name)}/refresh`);
      const p = body.provider;
      if (opts.json) printJson(o, p);
      // The daemon keeps the provider and its last good list, but the refresh itself failed: a
      // script must be able to tell (adding an offline provider is fine; refreshing one is not).
      if (p.discovery_error) throw new CliError(`${name}: discovery failed: ${p.discovery_error} (it still offers ${p.discovered_models.length} models from the last good refresh).`);
      if (!opts.json) o.err(`${name}: ${p.discovered_models.length} models.\n`);
    });

  providers
    .command('remove <name>')
    .description('Remove a provider and its aliases')
    .action(async (name: string, _opts, cmd: Command) => {
      await (await connect(cmd)).request('DELETE', `/svc/v1/providers/${encodeURIComponent(name)}`);
      o.err(`Removed ${name}.\n`);
    });
}
