import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Command, Option } from 'commander';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/main.js';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';

/** Every command path and long option the CLI defines, as the man page test walks them. */
function walk(command: Command, prefix: string[] = []): { path: string[]; command: Command }[] {
  return command.commands.flatMap((sub) => [{ path: [...prefix, sub.name()], command: sub }, ...walk(sub, [...prefix, sub.name()])]);
}
const program = buildProgram({ out() {}, err() {}, isTTY: false });
const commands = walk(program);

describe('svc completion bash|zsh|fish, generated from the command definitions', () => {
  const scripts: Record<string, string> = {};
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'svc-completion-'));
    for (const shell of ['bash', 'zsh', 'fish']) {
      const r = await runSvcInProcess(['completion', shell], { env: cleanEnv() });
      expect(r.exitCode, r.stderr).toBe(0);
      scripts[shell] = r.stdout;
    }
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it.each(['bash', 'zsh', 'fish'])('the %s script names every command and every long option', (shell) => {
    const script = scripts[shell];
    for (const { path: p, command } of commands) {
      expect(script, `${shell}: ${p.join(' ')}`).toMatch(new RegExp(`(^|[^\\w-])${p.at(-1)}([^\\w-]|$)`, 'm'));
      for (const o of command.options as Option[]) if (o.long) expect(script, `${shell}: ${o.long}`).toContain(shell === 'fish' ? `-l ${o.long.slice(2)}` : o.long);
    }
  });

  it('refuses a shell it does not know (exit 2)', async () => {
    const r = await runSvcInProcess(['completion', 'tcsh'], { env: cleanEnv() });
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe('');
  });

  it('the bash script parses (bash -n) and completes commands, subcommands, options and choices', async () => {
    const file = path.join(dir, 'svc.bash');
    await writeFile(file, scripts.bash);
    expect((await execa('bash', ['-n', file], { reject: false })).exitCode).toBe(0);
    const complete = async (...words: string[]) => {
      const script = `source ${JSON.stringify(file)}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _svc; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const r = await execa('bash', ['-c', script], { cwd: dir });
      return r.stdout.split('\n').filter(Boolean);
    };
    expect(await complete('svc', '')).toEqual(program.commands.map((c) => c.name()));
    expect(await complete('svc', 're')).toEqual(['requests', 'review']);
    // the subcommands as defined, in their order
    expect(await complete('svc', 'requests', '')).toEqual(program.commands.find((c) => c.name() === 'requests')!.commands.map((c) => c.name()));
    expect(await complete('svc', 'requests', '')).toEqual(expect.arrayContaining(['list', 'show', 'approve', 'deny', 'revoke', 'limits']));
    expect(await complete('svc', '--data-dir', '/tmp/x', 'requests', 'ap')).toEqual(['approve']);
    expect(await complete('svc', 'requests', 'list', '--status', 'p')).toEqual(['pending']);
    expect(await complete('svc', 'requests', 'list', '--')).toEqual(expect.arrayContaining(['--status', '--json', '--help', '--data-dir']));
    expect(await complete('svc', 'keys', 'create', 'x', '--mcp', 'u=1', '--e')).toEqual(['--expires']);
    expect(await complete('svc', 'completion', '')).toEqual(['bash', 'zsh', 'fish']);
  });
});
