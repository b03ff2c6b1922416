import { type Command, Option } from 'commander';
import type { z } from 'zod';
import type { grantToolChoices, HeldCallView, reviewTool, ToolPoliciesInput } from '../../mcp/policy-schemas.js';
import { argumentsText, visibleText } from '../../mcp/display.js';
import { hintWords } from '../../mcp/choices.js';
import { inert } from '../../text.js';
import { DaemonClient, usage } from '../client.js';
import { resolve, resolveId, shortId } from '../ids.js';
import { type Output, printFields, printJson, printRows, when } from '../output.js';
import { CliError, EXIT } from '../errors.js';

/** The choices (and what `svc requests show` prints of tools), as the API answers them; type-only, so the CLI never loads zod. */
type GrantChoices = z.infer<typeof grantToolChoices>;
type ReviewTool = z.infer<typeof reviewTool>;

const CHOICES = ['allow', 'ask', 'deny'] as const;
const collect = (value: string, previous: string[] = []) => [...previous, value];
const enc = encodeURIComponent;

/** `10m`, `2h`, `90` (minutes): how long an approval is remembered, in minutes (1 to 1440). */
export function parseForMinutes(value: string): number {
  const m = /^(\d{1,5})\s*(m|min|minutes?|h|hours?)?$/i.exec(value.trim());
  const minutes = m ? Number(m[1]) * (m[2] && /^h/i.test(m[2]) ? 60 : 1) : NaN;
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > 1440) throw usage(`--for takes a time from 1m to 24h, such as 10m or 1h, not "${value}".`);
  return minutes;
}

/** A remembered approval as `svc requests show` and `svc requests tools` print it. */
export function rememberedLine(r: GrantChoices['remembered'][number], now = Date.now()): string {
  const minutes = Math.max(0, Math.ceil((Date.parse(r.until) - now) / 60_000));
  const at = new Date(r.until).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return `${inert(r.tool, 120)}  runs without asking until ${at} (${minutes} min), approved by ${inert(r.approved_by, 60)}`;
}

function age(iso: string, now: number): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

/** A held call in full: who, which tool, when, and every character of its arguments. */
function printCall(o: Output, c: HeldCallView): void {
  printFields(o, [
    ['id', c.id],
    ['status', c.status],
    ['app', c.app_name ?? c.app_client_id],
    ['client id', c.app_client_id],
    ['tool', visibleText(c.tool)],
    ['instance', `${c.instance_name}  ${o.isTTY ? shortId(c.instance_id) : c.instance_id}`],
    ['held', when(o, c.created_at)],
    ...(c.status === 'pending' ? ([['expires', when(o, c.expires_at)]] as [string, unknown][]) : ([['decided', `${when(o, c.decided_at)}${c.decided_by ? ` by ${c.decided_by}` : ''}`]] as [string, unknown][])),
    ...(c.reason ? ([['reason', c.reason]] as [string, unknown][]) : []),
  ]);
  // never through printFields, which caps a value: the arguments are what the person decides on
  if (!o.isTTY) return o.out(`arguments\t${argumentsText(c.arguments, 0)}\n`);
  o.out(`arguments (exactly what runs if you approve):\n${argumentsText(c.arguments).replace(/^/gm, '  ')}\n`);
}

/** One line of a tool for `svc requests show`: its name, its choice, its hints. */
export function toolLine(t: ReviewTool): string {
  const words = hintWords(t.annotations);
  const chosen = t.owner_denied ? 'deny (the instance owner\'s allow-list)' : `${t.choice}${t.choice === t.default_choice ? ' (default)' : ` (default ${t.default_choice})`}`;
  return `${inert(t.name, 120)}  ${chosen}${words.length ? `  [${words.join(', ')}]` : ''}`;
}

/** `svc calls`: the tool calls held for the person's decision. */
export function registerCalls(program: Command, o: Output): void {
  const calls = program
    .command('calls')
    .description('Tool calls held for your decision: a tool you set to ask runs only once you approve that very call')
    .addHelpText(
      'after',
      `
Examples:
  $ svc calls list
  $ svc calls list --json
  $ svc calls show 5d2a9c               # one call, its arguments in full
  $ svc calls approve 5d2a9c            # a unique prefix of the id will do
  $ svc calls approve 5d2a9c --for 10m  # and the same tool of that grant runs without asking for 10 minutes
  $ svc calls deny 5d2a9c
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
  const callId = (client: DaemonClient, typed: string) => resolve(client, 'call', typed);

  calls
    .command('list')
    .description('Held calls, waiting ones first, with their arguments (and those decided in the last hour)')
    .addOption(new Option('--status <status>', 'only this status').choices(['pending', 'approved', 'denied', 'expired', 'failed']))
    .option('--json', 'machine-readable output (arguments in full)')
    .action(async (opts: { status?: string; json?: boolean }, cmd: Command) => {
      const q = opts.status ? `?status=${enc(opts.status)}` : '';
      const { body } = await (await connect(cmd)).request<{ data: HeldCallView[] }>('GET', `/svc/v1/calls${q}`);
      const rows = [...body.data].sort((a, b) => Number(b.status === 'pending') - Number(a.status === 'pending'));
      if (opts.json) return printJson(o, rows);
      const now = Date.now();
      printRows(o, rows, [
        { header: 'id', value: (c) => (o.isTTY ? shortId(c.id) : c.id) },
        { header: 'status', value: (c) => c.status },
        { header: 'app', value: (c) => c.app_name ?? c.app_client_id },
        { header: 'tool', value: (c) => c.tool },
        { header: 'instance', value: (c) => c.instance_name },
        { header: 'waiting', value: (c) => (c.status === 'pending' ? age(c.created_at, now) : `${Math.round((c.waited_ms ?? 0) / 1000)}s`) },
        // the arguments on one line, every invisible character shown as its escape; in full piped,
        // and where a terminal cuts them, the row says how much is left and where to read it
        { header: 'arguments', value: (c) => argumentsText(c.arguments, 0), more: (c, hidden) => `… (${hidden} more characters: svc calls show ${o.isTTY ? shortId(c.id) : c.id})` },
      ]);
    });

  calls
    .command('show <id>')
    .description('One held call, its arguments in full, exactly as they run if you approve')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await callId(client, typed);
      const { body } = await client.request<{ data: HeldCallView[] }>('GET', '/svc/v1/calls');
      const call = body.data.find((c) => c.id === id);
      if (!call) throw new CliError(`No held call of yours has the id ${inert(typed, 100)} (\`svc calls list\` shows them; a decided call is kept an hour).`, EXIT.error);
      if (opts.json) return printJson(o, call);
      printCall(o, call);
    });

  calls
    .command('approve <id>')
    .description('Let a held call run, once, exactly as it was held; the app gets its answer')
    .option('--for <time>', 'also let the same tool of the same grant and instance run without asking for this long (e.g. 10m, 1h)')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { for?: string; json?: boolean }, cmd: Command) => {
      const minutes = opts.for === undefined ? undefined : parseForMinutes(opts.for);
      const client = await connect(cmd);
      const id = await callId(client, typed);
      const { body } = await client.request<HeldCallView>('POST', `/svc/v1/calls/${enc(id)}/approve`, minutes ? { remember_minutes: minutes } : {});
      if (opts.json) return printJson(o, body);
      o.err(`Approved ${inert(body.tool, 120)} for ${inert(body.app_name ?? body.app_client_id, 120)}: it runs now, once.${body.remember_until ? ` The same tool of this grant runs without asking ${o.isTTY ? `for the next ${when(o, body.remember_until).replace(/^in /, '')}` : `until ${body.remember_until}`}.` : ''}\n`);
    });

  calls
    .command('deny <id>')
    .description('Decline a held call: it does not run, and the app is told you declined')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await callId(client, typed);
      const { body } = await client.request<HeldCallView>('POST', `/svc/v1/calls/${enc(id)}/deny`);
      if (opts.json) return printJson(o, body);
      o.err(`Denied ${inert(body.tool, 120)} for ${inert(body.app_name ?? body.app_client_id, 120)}: it did not run.\n`);
    });
}

/** `svc requests tools`: a grant's tool choices, later. Added to the `requests` group. */
export function registerRequestTools(program: Command, o: Output): void {
  const requests = program.commands.find((c) => c.name() === 'requests');
  if (!requests) return;
  requests
    .command('tools <id>')
    .description("Change a grant's tool choices for one instance; without a change, show them")
    .addHelpText(
      'after',
      `
Examples:
  $ svc requests tools 3f2c... --instance 9b1e... --ask delete_file --deny format_disk
  $ svc requests tools 3f2c... --instance 9b1e... --default ask
  $ svc requests tools 3f2c...
  $ svc requests tools 3f2c... --instance 9b1e... --forget delete_file
`,
    )
    .option('--instance <id>', 'the granted MCP instance (its id or a unique prefix)')
    .option('--allow <name>', 'let this tool run (repeatable)', collect, [])
    .option('--ask <name>', 'hold each call of this tool for your approval (repeatable)', collect, [])
    .option('--deny <name>', 'refuse this tool and leave it out of tools/list (repeatable)', collect, [])
    .option('--reset <name>', 'back to the default for this tool (repeatable)', collect, [])
    .addOption(new Option('--default <choice>', 'for every tool without a choice of its own').choices([...CHOICES, 'annotations']))
    .option('--forget [name]', "end remembered approvals (svc calls approve --for): this tool's (with --instance), or all of --instance, or all of the grant")
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { instance?: string; allow: string[]; ask: string[]; deny: string[]; reset: string[]; default?: string; forget?: string | true; json?: boolean }, cmd: Command) => {
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      const id = await resolve(client, 'request', typed);
      const changes = [...opts.allow, ...opts.ask, ...opts.deny, ...opts.reset];
      let choices: GrantChoices[];
      if (opts.forget !== undefined) {
        if (changes.length > 0 || opts.default !== undefined) throw usage('--forget ends remembered approvals only; change choices in another run.');
        const tool = typeof opts.forget === 'string' ? opts.forget : undefined;
        if (tool !== undefined && !opts.instance) throw usage("Name the instance of the tool whose remembered approval you end: --instance ID.");
        const query = new URLSearchParams();
        if (opts.instance) {
          const { body: review } = await client.request<{ tool_choices?: GrantChoices[] }>('GET', `/svc/v1/access-requests/${enc(id)}/review`);
          query.set('instance_id', resolveId(opts.instance, (review.tool_choices ?? []).map((c) => c.instance_id), 'instance'));
        }
        if (tool !== undefined) query.set('tool', tool);
        const { body } = await client.request<{ tool_choices: GrantChoices[] }>('DELETE', `/svc/v1/access-requests/${enc(id)}/remembered${query.size ? `?${query}` : ''}`);
        choices = body.tool_choices;
        o.err(`Ended the remembered approvals${tool !== undefined ? ` of ${inert(tool, 120)}` : ''}: the next call of ${tool !== undefined ? 'it' : 'each such tool'} waits for you again.\n`);
      } else if (changes.length === 0 && opts.default === undefined) {
        const { body } = await client.request<{ tool_choices?: GrantChoices[] }>('GET', `/svc/v1/access-requests/${enc(id)}/review`);
        choices = body.tool_choices ?? [];
      } else {
        if (!opts.instance) throw usage('Name the instance whose tools you change: --instance ID.');
        const { body: review } = await client.request<{ tool_choices?: GrantChoices[] }>('GET', `/svc/v1/access-requests/${enc(id)}/review`);
        const instance = resolveId(opts.instance, (review.tool_choices ?? []).map((c) => c.instance_id), 'instance');
        const seen = new Set<string>();
        for (const name of changes) {
          if (seen.has(name)) throw usage(`${name} is named twice; give each tool one choice.`);
          seen.add(name);
        }
        const tools = Object.fromEntries([
          ...opts.allow.map((n) => [n, 'allow']),
          ...opts.ask.map((n) => [n, 'ask']),
          ...opts.deny.map((n) => [n, 'deny']),
          ...opts.reset.map((n) => [n, null]),
        ]);
        const policy: ToolPoliciesInput[string] = {
          ...(changes.length > 0 ? { tools } : {}),
          ...(opts.default !== undefined ? { default: opts.default === 'annotations' ? null : (opts.default as (typeof CHOICES)[number]) } : {}),
        };
        const { body } = await client.request<{ tool_choices: GrantChoices[] }>('PUT', `/svc/v1/access-requests/${enc(id)}/tools`, { [instance]: policy });
        choices = body.tool_choices;
      }
      if (opts.json) return printJson(o, choices);
      if (choices.length === 0) o.err('This grant has no MCP instance, or is not approved.\n');
      for (const c of choices) {
        printFields(o, [
          ['instance', `${c.instance_id}  ${c.instance_name ?? '(removed)'}`],
          ['default', c.default ?? 'by annotations (ask for a destructive tool, else allow)'],
        ]);
        if (!c.tools_known) printFields(o, [['  tools', '(not known yet: refresh them, or call one)']]);
        for (const t of c.tools) printFields(o, [['  tool', toolLine(t)]]);
        const listed = new Set(c.tools.map((t) => t.name));
        for (const [name, choice] of Object.entries(c.choices)) if (!listed.has(name)) printFields(o, [['  tool', `${inert(name, 120)}  ${choice} (not in the server's list)`]]);
        for (const r of c.remembered ?? []) printFields(o, [['  remembered', rememberedLine(r)]]);
      }
    });
}
