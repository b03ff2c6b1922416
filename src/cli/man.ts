import type { Command, Option } from 'commander';

/** roff-escaped text: hyphens as `\-`, backslashes doubled. */
const roff = (text: string) => text.replace(/\\/g, '\\e').replace(/-/g, '\\-');

function leafCommands(command: Command, prefix: string[] = []): { path: string[]; command: Command }[] {
  return command.commands.flatMap((sub) => {
    const path = [...prefix, sub.name()];
    return sub.commands.length > 0 ? leafCommands(sub, path) : [{ path, command: sub }];
  });
}

function optionLines(option: Option): string[] {
  if (option.hidden) return [];
  const flag = roff(option.long ?? option.short ?? '');
  const arg = /<([^>]+)>|\[([^\]]+)\]/.exec(option.flags);
  if (!arg) return [`.RB [ ${flag} ]`];
  return [`.RB [ ${flag}`, `.IR ${roff((arg[1] ?? arg[2]).replace(/\s+/g, '_'))} ]`];
}

/**
 * The SYNOPSIS of man/svc.1, generated from the same commander definitions as `--help` (as gh
 * generates its man pages from cobra), so it cannot drift from the CLI. scripts/gen-man.mjs writes
 * it into the page at build time; test/docs.test.ts checks the page holds exactly this.
 */
export function synopsis(program: Command): string {
  const lines = ['.B svc', '.RI [ global-options ]', '.I command', '.RI [ options ]', '.RI [ arguments ]', '.PP'];
  for (const { path, command } of leafCommands(program)) {
    lines.push(`.B svc ${path.join(' ')}`);
    for (const arg of command.registeredArguments) lines.push(arg.required ? `.I ${roff(arg.name())}` : `.RI [ ${roff(arg.name())} ]`);
    for (const option of command.options) lines.push(...optionLines(option as Option));
    lines.push('.br');
  }
  return `${lines.join('\n')}\n`;
}

/** The page with its SYNOPSIS section replaced by `text`. */
export function withSynopsis(page: string, text: string): string {
  const start = page.indexOf('.SH SYNOPSIS\n');
  const end = page.indexOf('\n.SH ', start + 1);
  if (start === -1 || end === -1) throw new Error('man page has no SYNOPSIS section followed by another');
  return `${page.slice(0, start)}.SH SYNOPSIS\n${text}${page.slice(end + 1)}`;
}
