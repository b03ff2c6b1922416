import { Argument, type Command } from 'commander';
import { completionScript, type Shell, SHELLS } from '../completion.js';
import type { Output } from '../output.js';

export function registerCompletion(program: Command, o: Output): void {
  program
    .command('completion')
    .description('Print a shell completion script (bash, zsh or fish), generated from the commands themselves')
    .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(SHELLS))
    .addHelpText(
      'after',
      `
Examples:
  $ source <(svc completion bash)                                         # this shell only
  $ svc completion bash > ~/.local/share/bash-completion/completions/svc  # every new bash
  $ svc completion zsh > "\${fpath[1]}/_svc"
  $ svc completion fish > ~/.config/fish/completions/svc.fish
`,
    )
    .action((shell: Shell, _opts, cmd: Command) => {
      o.out(completionScript(cmd.parent!, shell));
    });
}
