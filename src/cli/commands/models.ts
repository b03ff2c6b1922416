import type { Command } from 'commander';
import { DaemonClient, usage } from '../client.js';
import { CliError } from '../errors.js';
import { type Output, printJson, printRows } from '../output.js';
import type { z } from 'zod';
import type { alias } from '../../models/catalog.js';
import type { pullJob } from '../../models/downloads.js';

/** as the API answers them (the routes' own schemas; type-only, so the CLI never loads zod) */
type Alias = z.infer<typeof alias>;

type Pull = z.infer<typeof pullJob>;

const mib = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;

export function progressLine(p: Pull, width = 30): string {
  // An app's view of a download carries no sizes (it learns only success or failure).
  if (p.bytes_done === null) return `${p.filename} ${p.status}`;
  if (p.bytes_total) {
    const share = Math.min(1, p.bytes_done / p.bytes_total);
    const filled = Math.round(share * width);
    return `${p.filename} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.round(share * 100)).padStart(3)}% ${mib(p.bytes_done)}/${mib(p.bytes_total)} ${p.status}`;
  }
  return `${p.filename} ${mib(p.bytes_done)} ${p.status}`;
}

export function registerModels(program: Command, o: Output): void {
  const models = program
    .command('models')
    .description('Model aliases and model file downloads (power user and above)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc models alias fast --provider ollama --model llama3.2:3b --default temperature=0.2
  $ svc models list
  $ svc models remove fast
  $ svc models pull https://example.test/models/tiny.gguf --sha256 9f86d0...
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);

  models
    .command('alias <id>')
    .description('Map a public model id to a provider model, with default request parameters')
    .requiredOption('--provider <name>', 'provider name')
    .requiredOption('--model <model>', 'the upstream model')
    .option('--default <key=json>', 'a default request field, e.g. temperature=0.2 (repeatable)', (v: string, prev: string[] = []) => [...prev, v], [])
    .action(async (id: string, opts: { provider: string; model: string; default: string[] }, cmd: Command) => {
      const defaults: Record<string, unknown> = {};
      for (const pair of opts.default) {
        const at = pair.indexOf('=');
        if (at <= 0) throw usage(`--default takes key=value, not "${pair}".`);
        const raw = pair.slice(at + 1);
        try {
          defaults[pair.slice(0, at)] = JSON.parse(raw);
        } catch {
          defaults[pair.slice(0, at)] = raw;
        }
      }
      await (await connect(cmd)).request('PUT', `/svc/v1/models/${encodeURIComponent(id)}`, { provider: opts.provider, model: opts.model, defaults });
      o.err(`${id} -> ${opts.provider}/${opts.model}\n`);
    });

  models
    .command('list')
    .description('List every model you can call (as /v1/models lists them), aliases and provider models')
    .option('--aliases', 'only aliases, with their provider, model and defaults')
    .option('--json', 'machine-readable output')
    .action(async (opts: { aliases?: boolean; json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      if (opts.aliases) {
        const { body } = await client.request<{ data: Alias[] }>('GET', '/svc/v1/models');
        if (opts.json) return printJson(o, body.data);
        return printRows(o, body.data, [
          { header: 'alias', value: (a) => a.id },
          { header: 'provider', value: (a) => a.provider },
          { header: 'model', value: (a) => a.model },
          { header: 'defaults', value: (a) => JSON.stringify(a.defaults) },
        ]);
      }
      const { body } = await client.request<{ data: { id: string; kind: string; owned_by: string }[] }>('GET', '/svc/v1/models/available');
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        { header: 'model', value: (m) => m.id },
        { header: 'kind', value: (m) => m.kind },
        { header: 'served by', value: (m) => m.owned_by },
      ]);
    });

  models
    .command('remove <id>')
    .description('Remove an alias')
    .action(async (id: string, _opts, cmd: Command) => {
      await (await connect(cmd)).request('DELETE', `/svc/v1/models/${encodeURIComponent(id)}`);
      o.err(`Removed ${id}.\n`);
    });

  models
    .command('pull <url>')
    .description('Download a model file into the data dir (resumable, checksum verified), showing progress')
    .option('--filename <name>', 'file name in the models folder (default: from the URL)')
    .option('--sha256 <hex>', 'expected SHA-256; a mismatch fails the download')
    .option('--no-wait', 'start the download and print its id without waiting')
    .option('--json', 'machine-readable output (the final job)')
    .action(async (url: string, opts: { filename?: string; sha256?: string; wait: boolean; json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      let { body: job } = await client.request<Pull>('POST', '/svc/v1/models/files/pull', {
        url,
        ...(opts.filename ? { filename: opts.filename } : {}),
        ...(opts.sha256 ? { sha256: opts.sha256 } : {}),
      });
      if (!opts.wait) {
        if (opts.json) printJson(o, job);
        else o.out(`${job.id}\n`);
        return;
      }
      let lastPlain = '';
      for (;;) {
        if (!opts.json) {
          const line = progressLine(job);
          if (o.isTTY) o.err(`\r\x1b[2K${line}`);
          else if (job.status !== lastPlain) {
            o.err(`${line}\n`);
            lastPlain = job.status;
          }
        }
        if (job.status === 'done' || job.status === 'failed') break;
        await new Promise((r) => setTimeout(r, 500));
        job = (await client.request<Pull>('GET', `/svc/v1/models/files/pull/${job.id}`)).body;
      }
      if (o.isTTY && !opts.json) o.err('\n');
      if (opts.json) printJson(o, job);
      if (job.status === 'failed') throw new CliError(`Download failed: ${job.error ?? 'unknown error'}`);
      if (!opts.json) o.err(`Saved ${job.filename} (sha256 ${job.sha256}).\n`);
    });
}
