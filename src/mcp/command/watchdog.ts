import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '../../log.js';
import { FALLBACK_PATH } from './env.js';

/**
 * The watchdog's script, run by /bin/sh. svc writes `+<pgid>` when a child starts and `-<pgid>`
 * once its group is gone; the shell blocks on `read` meanwhile (no CPU). At end of input, which
 * comes when svc exits by any means, SIGKILL included, it sends TERM to every group still listed,
 * waits up to 1.5 s for them to go, sends KILL to what is left, and exits. It ignores the
 * terminal's INT and HUP, so a Ctrl-C that reaches it cannot end it before its job.
 */
export const WATCHDOG_SCRIPT = `
trap '' INT HUP
groups=' '
while read -r line; do
  g=\${line#?}
  case "$g" in ''|*[!0-9]*) continue ;; esac
  case "$line" in
    +*) groups="$groups$g " ;;
    -*) case "$groups" in *" $g "*) groups="\${groups%% $g *} \${groups#* $g }" ;; esac ;;
  esac
done
set -- $groups
[ $# -eq 0 ] && exit 0
for g in $groups; do kill -TERM -"$g" 2>/dev/null; done
i=0
while [ $i -lt 15 ]; do
  alive=
  for g in $groups; do kill -0 -"$g" 2>/dev/null && alive=1; done
  [ -z "$alive" ] && exit 0
  sleep 0.1 2>/dev/null || sleep 1
  i=$((i + 1))
done
for g in $groups; do kill -KILL -"$g" 2>/dev/null; done
exit 0
`;

/**
 * One small shell per supervisor that ends svc's children if svc dies without ending them. Started
 * with the first child, in a process group of its own, holding nothing of svc's environment; it
 * keeps neither svc's event loop nor its exit waiting. If it is gone (killed), the next child
 * starts another, which is told every group that runs.
 */
export class Watchdog {
  private proc: ChildProcess | null = null;

  constructor(
    private readonly logger: Logger,
    private readonly running: () => number[],
  ) {}

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  add(pgid: number): void {
    if (!this.proc) this.launch(new Set([...this.running(), pgid]));
    else this.write(`+${pgid}\n`);
  }

  remove(pgid: number): void {
    if (this.proc) this.write(`-${pgid}\n`);
  }

  /** Ends the watchdog (svc stopping, its children ended): end of input, with nothing listed, makes it exit. */
  close(): void {
    const proc = this.proc;
    this.proc = null;
    proc?.stdin?.end();
  }

  private launch(groups: Set<number>) {
    const proc = spawn('/bin/sh', ['-c', WATCHDOG_SCRIPT], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
      env: { PATH: FALLBACK_PATH },
      cwd: '/',
    });
    this.proc = proc;
    proc.on('error', (err) => {
      this.logger.warn({ err: err.message }, 'the command servers\' watchdog could not start; a killed svc leaves them to the next start');
      if (this.proc === proc) this.proc = null;
    });
    proc.on('exit', () => {
      if (this.proc === proc) this.proc = null;
    });
    proc.stdin!.on('error', () => undefined);
    proc.unref();
    (proc.stdin as unknown as { unref?: () => void }).unref?.();
    this.write([...groups].map((g) => `+${g}\n`).join(''));
  }

  private write(text: string) {
    this.proc?.stdin?.write(text);
  }
}
