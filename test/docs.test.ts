import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Command, Option } from 'commander';
import { describe, expect, it } from 'vitest';
import { CLI_SESSION_FILE } from '../src/cli/credentials.js';
import { EXIT } from '../src/cli/errors.js';
import { buildProgram } from '../src/cli/main.js';
import { synopsis, withSynopsis } from '../src/cli/man.js';
import { MASTER_KEY_FILE } from '../src/store/master-key.js';
import { STORE_FILE } from '../src/store/store.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const MAN_FILE = path.join(ROOT, 'man', 'svc.1');
const roff = readFileSync(MAN_FILE, 'utf8');

/** Roff source to plain text, enough for text checks: fonts off, `\-` to `-`, comments out. */
function plain(text: string): string {
  return text
    .split('\n')
    .filter((l) => !l.startsWith('.\\"'))
    .join('\n')
    .replace(/\\f(\[[^\]]*\]|\(..|.)/g, '')
    .replace(/\\-/g, '-')
    .replace(/\\e/g, '\\')
    .replace(/\\&/g, '')
    .replace(/\\\(em/g, '—');
}

const unquote = (s: string) => s.trim().replace(/^"(.*)"$/, '$1');

/** The man page cut at .SH and .SS: heading (plain) and body (plain). */
function sections(): { level: 'SH' | 'SS'; title: string; body: string }[] {
  const out: { level: 'SH' | 'SS'; title: string; body: string[] }[] = [];
  for (const line of roff.split('\n')) {
    const m = line.match(/^\.(SH|SS)\s+(.*)$/);
    if (m) out.push({ level: m[1] as 'SH' | 'SS', title: plain(unquote(m[2])), body: [] });
    else out.at(-1)?.body.push(line);
  }
  return out.map((s) => ({ ...s, body: plain(s.body.join('\n')) }));
}

interface CommandInfo {
  path: string;
  command: Command;
}

function walk(command: Command, prefix: string[] = []): CommandInfo[] {
  return command.commands.flatMap((sub) => {
    const p = [...prefix, sub.name()];
    return [{ path: p.join(' '), command: sub }, ...walk(sub, p)];
  });
}

const program = buildProgram({ out() {}, err() {}, isTTY: false });
const commands = walk(program);
const hasToken = (text: string, token: string) =>
  new RegExp(`(^|[^\\w-])${token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w-])`, 'm').test(text);

describe('man/svc.1 is generated from the command definitions', () => {
  it('holds exactly the SYNOPSIS that `npm run build` generates (so no command can be missing from it)', () => {
    expect(withSynopsis(roff, synopsis(program))).toBe(roff);
    for (const { path: p } of commands.filter((c) => c.command.commands.length === 0)) expect(roff).toContain(`.B svc ${p}\n`);
  });
});

function sectionFor(commandPath: string) {
  return sections().find((s) => s.level === 'SS' && (s.title === `svc ${commandPath}` || s.title.startsWith(`svc ${commandPath} `)));
}

describe('man/svc.1', () => {
  it('is the page package.json installs, with the usual sections', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { man?: string[]; files?: string[] };
    expect(pkg.man).toContain('man/svc.1');
    expect(pkg.files).toContain('man');
    expect(roff).toMatch(/^\.TH SVC 1 /m);
    const titles = sections()
      .filter((s) => s.level === 'SH')
      .map((s) => s.title);
    for (const t of ['NAME', 'SYNOPSIS', 'DESCRIPTION', 'GLOBAL OPTIONS', 'COMMANDS', 'ENVIRONMENT', 'FILES', 'EXIT STATUS', 'EXAMPLES']) {
      expect(titles).toContain(t);
    }
  });

  it('finds commands to check (the walk works)', () => {
    const paths = commands.map((c) => c.path);
    for (const p of ['serve', 'status', 'login', 'logout', 'requests approve', 'mcp allow-tools', 'users set-role']) expect(paths).toContain(p);
  });

  it.each(commands.map((c) => [c.path, c] as const))('documents `svc %s`, its arguments, options and choices', (_p, { path: commandPath, command }) => {
    const section = sectionFor(commandPath);
    expect(section, `no .SS "svc ${commandPath}" section`).toBeDefined();
    for (const arg of command.registeredArguments) {
      expect(hasToken(section!.title, arg.name()), `argument ${arg.name()} in the heading "${section!.title}"`).toBe(true);
    }
    for (const option of command.options as Option[]) {
      if (!option.long) continue;
      expect(hasToken(section!.body, option.long), `${option.long} of svc ${commandPath}`).toBe(true);
      for (const choice of option.argChoices ?? []) expect(hasToken(section!.body, choice), `choice ${choice} of ${option.long}`).toBe(true);
    }
  });

  it('documents every global option and the help and version flags', () => {
    const global = sections().find((s) => s.title === 'GLOBAL OPTIONS');
    expect(global).toBeDefined();
    for (const option of program.options as Option[]) {
      expect(hasToken(global!.body, option.long!), option.long).toBe(true);
      if (option.short) expect(hasToken(global!.body, option.short), option.short).toBe(true);
    }
    expect(hasToken(global!.body, '--help')).toBe(true);
  });

  it('documents every long option somewhere, and names no command the CLI lacks', () => {
    const text = plain(roff);
    const longs = new Set([program, ...commands.map((c) => c.command)].flatMap((c) => (c.options as Option[]).map((o) => o.long!).filter(Boolean)));
    for (const long of longs) expect(hasToken(text, long), long).toBe(true);
    const known = new Set(['help', ...commands.map((c) => c.path)]);
    for (const s of sections().filter((x) => x.level === 'SS')) {
      const words = s.title.replace(/^svc /, '').split(/\s+/);
      const documented = words.slice(0, 2).join(' ');
      expect(known.has(documented) || known.has(words[0]), `"${s.title}" is not a command`).toBe(true);
    }
  });

  it('documents every SVC_* environment variable the code reads', () => {
    const env = sections().find((s) => s.title === 'ENVIRONMENT')!.body;
    const seen = new Set<string>();
    const scan = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const file = path.join(dir, name);
        if (statSync(file).isDirectory()) scan(file);
        else if (/\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name)) for (const m of readFileSync(file, 'utf8').matchAll(/\bSVC_[A-Z_]+\b/g)) seen.add(m[0]);
      }
    };
    scan(path.join(ROOT, 'src'));
    for (const v of ['SVC_HOST', 'SVC_PORT', 'SVC_HOME', 'SVC_BASE_URL', 'SVC_RATE_LIMIT_CLIENT', 'SVC_RATE_LIMIT_ADDRESS', 'SVC_KEYCHAIN', 'SVC_LOG_LEVEL']) seen.add(v);
    for (const v of seen) expect(hasToken(env, v), v).toBe(true);
    expect(hasToken(env, 'XDG_DATA_HOME')).toBe(true);
  });

  it('documents the files of the data dir', () => {
    const files = sections().find((s) => s.title === 'FILES')!.body;
    for (const f of [STORE_FILE, `${STORE_FILE}.bak`, 'daemon.json', 'daemon.lock', CLI_SESSION_FILE, MASTER_KEY_FILE]) {
      expect(hasToken(files, f), f).toBe(true);
    }
  });

  it('documents every exit code', () => {
    const section = roff.slice(roff.indexOf('.SH EXIT STATUS'), roff.indexOf('.SH EXAMPLES'));
    for (const code of Object.values(EXIT)) expect(section).toMatch(new RegExp(`^\\.TP\\n\\.B ${code}$`, 'm'));
  });
});

describe('man/svc.1 ENDPOINTS', () => {
  it('names every endpoint of the OpenAPI document, with its method', async () => {
    const { startTestDaemon } = await import('./helpers/daemon.js');
    const d = await startTestDaemon();
    try {
      const doc = (await (await fetch(`${d.url}/svc/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
      const section = sections().find((s) => s.level === 'SH' && s.title === 'ENDPOINTS')!.body;
      const missing = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)).filter((e) => !section.includes(`.B "${e}"\n`));
      expect(missing).toEqual([]);
      for (const p of ['/v1/completions', '/v1/responses']) expect(plain(roff.slice(roff.indexOf('.SH DESCRIPTION'), roff.indexOf('.SH GLOBAL OPTIONS')))).toContain(p);
    } finally {
      await d.stop();
    }
  });
});

describe('help', () => {
  it('every command, down to each subcommand, gives Usage first and then examples', async () => {
    const program = buildProgram({ out() {}, err() {}, isTTY: false });
    const missing: string[] = [];
    const walk = (cmd: Command, path: string[]) => {
      for (const sub of cmd.commands) {
        const full = [...path, sub.name()];
        let help = '';
        sub.configureOutput({ writeOut: (s) => (help += s), writeErr: () => undefined });
        sub.outputHelp();
        const usage = help.indexOf('Usage: ');
        const examples = help.indexOf('\nExamples:\n');
        if (usage !== 0 || examples < usage || !help.slice(examples).includes('$ ')) missing.push(full.join(' '));
        walk(sub, full);
      }
    };
    walk(program, ['svc']);
    expect(missing).toEqual([]);
  });
});

/** The markdown outside fenced code blocks, where links and headings live (a `# comment` in a shell block is neither). */
function prose(markdown: string): string {
  let fenced = false;
  return markdown
    .split('\n')
    .filter((line) => {
      if (/^\s*```/.test(line)) fenced = !fenced;
      return !fenced && !/^\s*```/.test(line);
    })
    .join('\n');
}

/** The anchors GitHub gives a file's headings: lower case, punctuation out, spaces to dashes, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1].toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Every relative link target of a markdown file: `[text](target)`, and `src`/`href` of inline HTML. */
function relativeLinks(markdown: string): string[] {
  const text = prose(markdown).replace(/`[^`\n]*`/g, '``');
  const targets = [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g), ...text.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
  return targets.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe('README.md and docs/*.md', () => {
  const files = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

  it('finds links to check (the scan works)', () => {
    const readme = relativeLinks(readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
    expect(readme).toContain('docs/design.md');
    expect(readme).toContain('#review-page');
    expect(anchors(readFileSync(path.join(ROOT, 'README.md'), 'utf8'))).toContain('terminal-review-svc-review');
  });

  it.each(files)('%s: every relative link reaches an existing file, and its #anchor a heading there', (file) => {
    const broken: string[] = [];
    for (const link of relativeLinks(readFileSync(path.join(ROOT, file), 'utf8'))) {
      const [target, anchor] = link.split('#', 2);
      const resolved = target ? path.resolve(path.dirname(path.join(ROOT, file)), decodeURIComponent(target)) : path.join(ROOT, file);
      if (!existsSync(resolved)) broken.push(`${link}: no such file`);
      else if (anchor && resolved.endsWith('.md') && !anchors(readFileSync(resolved, 'utf8')).has(anchor)) broken.push(`${link}: no such heading`);
    }
    expect(broken).toEqual([]);
  });
});
