import type { Command } from 'commander';
import { resolve, shortId } from '../ids.js';
import { DaemonClient, usage } from '../client.js';
import { type Output, printJson, printRows } from '../output.js';
import type { z } from 'zod';
import type { mcpInstance } from '../../mcp/schemas.js';
import { registerMcpHostConfigs } from './mcp-host-configs.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type Instance = z.infer<typeof mcpInstance>;

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function parseHeader(raw: string): { name: string; value: string } {
  const at = raw.indexOf(':');
  if (at <= 0) throw usage(`--header takes "Name: value", not "${raw.slice(0, 40)}".`);
  return { name: raw.slice(0, at).trim(), value: raw.slice(at + 1).trim() };
}

const toolList = (raw: string) => raw.split(',').map((t) => t.trim()).filter(Boolean);

export function registerMcp(program: Command, o: Output): void {
  const mcp = program
    .command('mcp')
    .description('Your MCP server instances, which you can grant to apps')
    .addHelpText(
      'after',
      `
Examples:
  $ svc mcp add --name files --url http://127.0.0.1:3001/mcp --header "Authorization: Bearer $TOKEN"
  $ svc mcp add --name search --url http://127.0.0.1:3002/mcp --allow-tools search,fetch
  $ svc mcp list --json
  $ svc mcp disable 9b1e...
  $ svc mcp enable 9b1e...
  $ svc mcp allow-tools 9b1e... search,fetch
  $ svc mcp remove 9b1e...
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
  /** A connection and the full id of one of your instances, from the id or a unique prefix. */
  const target = async (cmd: Command, typed: string) => {
    const client = await connect(cmd);
    return { client, id: await resolve(client, 'instance', typed) };
  };
  const enc = encodeURIComponent;

  mcp
    .command('add')
    .description('Register an MCP server instance (header values are stored encrypted, never shown again)')
    .requiredOption('--name <name>', 'a name for you to recognise it')
    .requiredOption('--url <url>', 'the MCP server URL (Streamable HTTP)')
    .option('--header <"Name: value">', 'a header svc sends upstream (repeatable)', collect, [])
    .option('--allow-tools <a,b>', 'only these tools are visible and callable')
    .option('--disabled', 'add it disabled')
    .option('--json', 'machine-readable output')
    .action(async (opts: { name: string; url: string; header: string[]; allowTools?: string; disabled?: boolean; json?: boolean }, cmd: Command) => {
      const body = {
        name: opts.name,
        url: opts.url,
        headers: opts.header.map(parseHeader),
        ...(opts.allowTools !== undefined ? { allow_tools: toolList(opts.allowTools) } : {}),
        ...(opts.disabled ? { enabled: false } : {}),
      };
      const { body: res } = await (await connect(cmd)).request<{ instance: Instance }>('POST', '/svc/v1/mcps', body);
      if (opts.json) return printJson(o, res.instance);
      o.out(`${res.instance.id}\n`);
      o.err(`Added ${res.instance.name} (${res.instance.url}).\nMCP hosts connect to ${res.instance.proxy_url} (they sign in through svc).\n`);
    });

  mcp
    .command('list')
    .description('List your instances')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ data: Instance[] }>('GET', '/svc/v1/mcps');
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        // the id and both URLs go into other commands and MCP hosts: never cut
        { header: 'id', value: (m) => (o.isTTY ? shortId(m.id) : m.id), copy: true },
        { header: 'name', value: (m) => m.name },
        { header: 'url', value: (m) => m.url, copy: true },
        { header: 'proxy url', value: (m) => m.proxy_url, copy: true },
        { header: 'enabled', value: (m) => (m.enabled ? 'yes' : 'no') },
        { header: 'tools', value: (m) => (m.allow_tools ? m.allow_tools.join(',') : 'all') },
        { header: 'headers', value: (m) => m.header_names.join(',') },
      ]);
    });

  for (const [verb, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    mcp
      .command(`${verb} <id>`)
      .description(`${verb === 'enable' ? 'Enable' : 'Disable'} an instance`)
      .action(async (typed: string, _opts, cmd: Command) => {
        const { client, id } = await target(cmd, typed);
        await client.request('PATCH', `/svc/v1/mcps/${enc(id)}`, { enabled });
        o.err(`${verb === 'enable' ? 'Enabled' : 'Disabled'} ${id}.\n`);
      });
  }

  mcp
    .command('allow-tools <id> <tools>')
    .description('Set the tool allow-list ("a,b"; "*" allows every tool)')
    .action(async (typed: string, tools: string, _opts, cmd: Command) => {
      const { client, id } = await target(cmd, typed);
      await client.request('PATCH', `/svc/v1/mcps/${enc(id)}`, { allow_tools: tools.trim() === '*' ? null : toolList(tools) });
      o.err(`Updated ${id}.\n`);
    });

  mcp
    .command('remove <id>')
    .description('Remove an instance')
    .action(async (typed: string, _opts, cmd: Command) => {
      const { client, id } = await target(cmd, typed);
      await client.request('DELETE', `/svc/v1/mcps/${enc(id)}`);
      o.err(`Removed ${id}.\n`);
    });

  registerMcpHostConfigs(mcp, o);
}
