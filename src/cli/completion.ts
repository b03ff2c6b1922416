import type { Command, Option } from 'commander';

/**
 * Shell completion scripts, generated from the same commander definitions as `--help` and the
 * man page (see man.ts), so a new command or option completes without anyone touching them.
 */

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

interface OptionSpec {
  flag: string;
  takesValue: boolean;
  choices: string[];
  /** a path: complete file names */
  file: boolean;
  description: string;
}

interface CommandSpec {
  /** '' for the program itself, else 'requests' or 'requests list' */
  path: string;
  name: string;
  description: string;
  subcommands: CommandSpec[];
  options: OptionSpec[];
  /** the values its first argument takes, when it names them (`svc completion <shell>`) */
  argChoices: string[];
}

const PATH_OPTIONS = /^--(data-dir|filename|master-key-file)$/;

/** The program's own options that hold after a command too (not --version). */
const globalsOf = (root: CommandSpec) => root.options.filter((o) => o.flag !== '--version' && o.flag !== '--help');

function optionSpecs(command: Command): OptionSpec[] {
  const specs = (command.options as Option[])
    .filter((o) => !o.hidden && o.long)
    .map((o) => ({
      flag: o.long!,
      takesValue: o.required || o.optional,
      choices: o.argChoices ?? [],
      file: PATH_OPTIONS.test(o.long!),
      description: o.description,
    }));
  return [...specs, { flag: '--help', takesValue: false, choices: [], file: false, description: 'display help for command' }];
}

function spec(command: Command, prefix: string[]): CommandSpec {
  const path = [...prefix, command.name()];
  return {
    path: prefix.length === 0 ? '' : path.slice(1).join(' '),
    name: command.name(),
    description: command.description(),
    subcommands: command.commands.map((c) => spec(c, path)),
    options: optionSpecs(command),
    argChoices: command.registeredArguments[0]?.argChoices ?? [],
  };
}

function all(root: CommandSpec): CommandSpec[] {
  return [root, ...root.subcommands.flatMap(all)];
}

/** Single-quoted for any POSIX shell (and fish, which reads the same quoting here). */
const sq = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
/** fish's single quotes take `\'` and `\\` only. */
const fishQuote = (text: string) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

function bash(root: CommandSpec): string {
  const commands = all(root);
  const globals = root.options;
  const caseOf = (body: (c: CommandSpec) => string | null) =>
    commands
      .map((c) => [c, body(c)] as const)
      .filter(([, b]) => b !== null)
      .map(([c, b]) => `    ${sq(c.path)}) ${b} ;;`)
      .join('\n');
  const valueFlags = [...new Set(commands.flatMap((c) => c.options.filter((o) => o.takesValue).map((o) => o.flag)))];
  const choiceCases = commands
    .flatMap((c) => [...c.options, ...(c === root ? [] : globals)].filter((o) => o.choices.length > 0).map((o) => `    ${sq(`${c.path} ${o.flag}`)}) COMPREPLY=($(compgen -W ${sq(o.choices.join(' '))} -- "$cur")) ;;`))
    .join('\n');
  const fileFlags = [...new Set(commands.flatMap((c) => c.options.filter((o) => o.file).map((o) => o.flag)))];
  return `# bash completion for svc, generated from its command definitions by \`svc completion bash\`.
# Load it now:        source <(svc completion bash)
# Or for good:        svc completion bash > ~/.local/share/bash-completion/completions/svc

_svc_subcommands() {
  case "$1" in
${caseOf((c) => (c.subcommands.length || c.argChoices.length ? `echo ${sq([...c.subcommands.map((s) => s.name), ...c.argChoices].join(' '))}` : null))}
  esac
}

_svc_options() {
  case "$1" in
${caseOf((c) => `echo ${sq(c.options.map((o) => o.flag).join(' '))}`)}
  esac
}

# the program's options, which hold after a command too
_svc_globals=${sq(globalsOf(root).map((o) => o.flag).join(' '))}

_svc() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local cmdpath="" word i subs
  # the command path so far (\`requests list\`), skipping options and the values they take
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case " ${valueFlags.join(' ')} " in
      *" $word "*) ((i++)); continue ;;
    esac
    [[ $word == -* ]] && continue
    subs=" $(_svc_subcommands "$cmdpath") "
    if [[ $subs == *" $word "* ]]; then cmdpath="\${cmdpath:+$cmdpath }$word"; fi
  done
  case " ${fileFlags.join(' ')} " in
    *" $prev "*) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  case "$cmdpath $prev" in
${choiceCases}
    *)
      case " ${valueFlags.join(' ')} " in
        *" $prev "*) COMPREPLY=(); return ;;
      esac
      if [[ $cur == -* ]]; then
        if [[ -z $cmdpath ]]; then COMPREPLY=($(compgen -W "$(_svc_options '')" -- "$cur"))
        else COMPREPLY=($(compgen -W "$(_svc_options "$cmdpath") $_svc_globals" -- "$cur")); fi
      else
        COMPREPLY=($(compgen -W "$(_svc_subcommands "$cmdpath")" -- "$cur"))
      fi
      ;;
  esac
}

complete -F _svc svc
`;
}

function zsh(root: CommandSpec): string {
  const commands = all(root);
  const described = (items: { name: string; description: string }[]) => items.map((i) => sq(`${i.name.replace(/:/g, '\\:')}:${oneLine(i.description)}`)).join(' ');
  const caseOf = (body: (c: CommandSpec) => string | null) =>
    commands
      .map((c) => [c, body(c)] as const)
      .filter(([, b]) => b !== null)
      .map(([c, b]) => `    ${sq(c.path)}) ${b} ;;`)
      .join('\n');
  const valueFlags = [...new Set(commands.flatMap((c) => c.options.filter((o) => o.takesValue).map((o) => o.flag)))];
  const choiceCases = commands
    .flatMap((c) => [...c.options, ...(c === root ? [] : root.options)].filter((o) => o.choices.length > 0).map((o) => `    ${sq(`${c.path} ${o.flag}`)}) compadd -- ${o.choices.map(sq).join(' ')}; return ;;`))
    .join('\n');
  const fileFlags = [...new Set(commands.flatMap((c) => c.options.filter((o) => o.file).map((o) => o.flag)))];
  return `#compdef svc
# zsh completion for svc, generated from its command definitions by \`svc completion zsh\`.
# Load it now:        source <(svc completion zsh)
# Or for good:        svc completion zsh > "\${fpath[1]}/_svc"   (a folder on $fpath)

_svc_subcommands() {
  case "$1" in
${caseOf((c) => (c.subcommands.length || c.argChoices.length ? `reply=(${described([...c.subcommands, ...c.argChoices.map((name) => ({ name, description: name }))])})` : 'reply=()'))}
  esac
}

_svc_options() {
  case "$1" in
${caseOf((c) => `reply=(${described(c.options.map((o) => ({ name: o.flag, description: o.description })))})`)}
  esac
}

_svc() {
  local cmdpath="" word i prev="\${words[CURRENT-1]}"
  local -a reply subs opts globals
  local -a value_flags=(${valueFlags.join(' ')})
  for ((i = 2; i < CURRENT; i++)); do
    word="\${words[i]}"
    if (( \${value_flags[(Ie)$word]} )); then ((i++)); continue; fi
    [[ $word == -* ]] && continue
    _svc_subcommands "$cmdpath"
    if (( \${reply[(I)$word:*]} )); then cmdpath="\${cmdpath:+$cmdpath }$word"; fi
  done
  case " ${fileFlags.join(' ')} " in
    *" $prev "*) _files; return ;;
  esac
  case "$cmdpath $prev" in
${choiceCases}
  esac
  if (( \${value_flags[(Ie)$prev]} )); then return; fi
  if [[ \${words[CURRENT]} == -* ]]; then
    _svc_options "$cmdpath"; opts=($reply)
    globals=(${globalsOf(root).map((o) => sq(`${o.flag}:${oneLine(o.description)}`)).join(' ')})
    [[ -z $cmdpath ]] && globals=()
    _describe -t options 'option' opts -- globals
  else
    _svc_subcommands "$cmdpath"; subs=($reply)
    (( \${#subs} )) && _describe -t commands 'command' subs
  fi
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _svc "$@"
else
  compdef _svc svc
fi
`;
}

function fish(root: CommandSpec): string {
  const lines = [
    '# fish completion for svc, generated from its command definitions by `svc completion fish`.',
    '# Load it now:        svc completion fish | source',
    '# Or for good:        svc completion fish > ~/.config/fish/completions/svc.fish',
    '',
    'complete -c svc -f',
  ];
  const option = (o: OptionSpec, condition: string | null) =>
    [
      'complete -c svc',
      condition ? `-n ${fishQuote(condition)}` : '',
      `-l ${o.flag.slice(2)}`,
      o.takesValue ? (o.file ? '-r -F' : '-x') : '',
      o.choices.length ? `-a ${fishQuote(o.choices.join(' '))}` : '',
      `-d ${fishQuote(oneLine(o.description))}`,
    ]
      .filter(Boolean)
      .join(' ');
  for (const o of root.options) lines.push(option(o, null));
  const groups = root.subcommands.map((s) => s.name);
  for (const top of root.subcommands) {
    lines.push(`complete -c svc -n ${fishQuote(`not __fish_seen_subcommand_from ${groups.join(' ')}`)} -a ${top.name} -d ${fishQuote(oneLine(top.description))}`);
    const inTop = `__fish_seen_subcommand_from ${top.name}`;
    if (top.subcommands.length === 0) {
      if (top.argChoices.length) lines.push(`complete -c svc -n ${fishQuote(`${inTop}; and not __fish_seen_subcommand_from ${top.argChoices.join(' ')}`)} -a ${fishQuote(top.argChoices.join(' '))}`);
      for (const o of top.options) lines.push(option(o, inTop));
      continue;
    }
    const subs = top.subcommands.map((s) => s.name);
    for (const sub of top.subcommands) {
      lines.push(`complete -c svc -n ${fishQuote(`${inTop}; and not __fish_seen_subcommand_from ${subs.join(' ')}`)} -a ${sub.name} -d ${fishQuote(oneLine(sub.description))}`);
      for (const o of sub.options) lines.push(option(o, `${inTop}; and __fish_seen_subcommand_from ${sub.name}`));
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The completion script for `shell`, for the commands of `program`. */
export function completionScript(program: Command, shell: Shell): string {
  const root = spec(program, []);
  return { bash, zsh, fish }[shell](root);
}
