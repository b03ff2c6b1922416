import { execFile } from 'node:child_process';
import { access, mkdir, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import { ConfigError, resolveConfig } from '../../config.js';
import { readDaemonInfo, usage } from '../client.js';
import { CliError } from '../errors.js';
import type { Output, ProcessRunner } from '../output.js';
import { servicePlan, SCRIPT_PATH, type ServicePlan } from '../service.js';

/** execFile to its end: the exit code and output, never a throw for a non-zero exit. */
export const execRunner: ProcessRunner = (file, args) =>
  new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = (err as NodeJS.ErrnoException | null)?.code;
      if (code === 'ENOENT') return reject(err);
      resolve({ code: err ? (typeof code === 'number' ? code : 1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });

const shown = (argv: string[]) => argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');

/** Runs each step; answers a sentence about the first that failed, or null. */
async function runSteps(run: ProcessRunner, steps: string[][]): Promise<string | null> {
  for (const [file, ...args] of steps) {
    try {
      const r = await run(file, args);
      if (r.code !== 0) return `\`${shown([file, ...args])}\` failed (exit ${r.code}${r.stderr.trim() ? `: ${r.stderr.trim().split('\n')[0]}` : ''})`;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'ENOENT' ? `${file} was not found (is ${file === 'systemctl' ? 'systemd' : 'launchd'} this system's service manager?)` : `\`${shown([file, ...args])}\` failed: ${(err as Error).message}`;
    }
  }
  return null;
}

/** Whether a daemon of the data dir runs now (its daemon.json names a live process). */
async function runningPid(dataDir: string): Promise<number | null> {
  const info = await readDaemonInfo(dataDir);
  if (!info?.pid) return null;
  try {
    process.kill(info.pid, 0);
    return info.pid;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? info.pid : null;
  }
}

const exists = (file: string) => access(file).then(() => true, () => false);

export function registerService(program: Command, o: Output): void {
  const service = program
    .command('service')
    .description('Run `svc serve` as a user service that starts at login (systemd on Linux, launchd on macOS)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc service install --dry-run      # print the unit (or agent) and what would run
  $ svc service install                # write it, enable it, start it
  $ journalctl --user -u svc           # its logs, on Linux
  $ svc service uninstall
`,
    );

  /** What the service runs and where it goes, from the same settings as every command. */
  const planFor = (cmd: Command): { plan: ServicePlan; dataDir: string } => {
    const flags = cmd.optsWithGlobals() as { dataDir?: string; host?: string; port?: string };
    const env = o.env ?? process.env;
    let dataDir: string;
    try {
      dataDir = resolveConfig(flags, env).dataDir;
    } catch (err) {
      if (err instanceof ConfigError) throw usage(err.message);
      throw err;
    }
    const pick = (flag: string | undefined, name: string) => flag ?? (env[name] ? env[name] : undefined);
    const host = pick(flags.host, 'SVC_HOST');
    const port = pick(flags.port, 'SVC_PORT');
    // The data dir is written out whole: the service must find the store this CLI found now,
    // whatever SVC_HOME or XDG_DATA_HOME its login session will have.
    const args = ['serve', '--data-dir', dataDir, ...(host ? ['--host', host] : []), ...(port ? ['--port', port] : []), '--log-format', 'human'];
    const home = env.HOME || os.homedir();
    const platform = o.platform ?? process.platform;
    const plan = servicePlan(platform, { node: process.execPath, script: SCRIPT_PATH, args, home }, env, process.getuid?.() ?? 0);
    if (!plan) throw new CliError(`svc knows no user service manager on ${platform}; run \`svc serve\` from your session's startup instead.`);
    return { plan, dataDir };
  };

  service
    .command('install')
    .description('Write and enable the user service, and start it unless a daemon already serves the data dir')
    .option('--dry-run', 'print the unit (or agent) and the commands, change nothing')
    .action(async (opts: { dryRun?: boolean }, cmd: Command) => {
      const { plan, dataDir } = planFor(cmd);
      const run = o.run ?? execRunner;
      if (opts.dryRun) {
        o.out(`# ${plan.file}\n${plan.text}\n# then: ${plan.enableNow.map(shown).join(' && ')}\n# logs: ${plan.logs}\n`);
        return;
      }
      // The first start prints the admin password once: to the service's log, nobody would see it.
      const { STORE_FILE } = await import('../../store/journal.js');
      if (!(await exists(path.join(dataDir, STORE_FILE)))) {
        throw new CliError(`The data dir ${dataDir} has no store yet, and its first start prints the admin password, which a service would write to its log. Run \`svc serve\` once in a terminal (note the password, then Ctrl-C), then \`svc service install\`.`);
      }
      for (const folder of [path.dirname(plan.file), ...plan.folders]) await mkdir(folder, { recursive: true });
      await writeFile(plan.file, plan.text, { mode: 0o644 });
      const pid = await runningPid(dataDir);
      const failed = await runSteps(run, pid ? plan.enable : plan.enableNow);
      if (failed) throw new CliError(`Wrote ${plan.file}, but ${failed}. Enable it by hand, or remove it with \`svc service uninstall\`.`);
      o.err(`Installed ${plan.file}: svc serve (data dir ${dataDir}) now starts at login${pid ? '' : ', and runs now'}.\n`);
      if (pid) o.err(`A daemon (pid ${pid}) serves this data dir already: stop it, then \`${plan.startLater}\` (or log in again).\n`);
      o.err(`Its logs: ${plan.logs}\n`);
    });

  service
    .command('uninstall')
    .description('Stop and disable the user service and remove its unit (or agent)')
    .option('--dry-run', 'print what would be run and removed, change nothing')
    .action(async (opts: { dryRun?: boolean }, cmd: Command) => {
      const { plan } = planFor(cmd);
      const run = o.run ?? execRunner;
      if (opts.dryRun) {
        o.out(`${[...plan.disable.map(shown), `rm ${shown([plan.file])}`, ...plan.afterRemove.map(shown)].join('\n')}\n`);
        return;
      }
      if (!(await exists(plan.file))) {
        o.err(`No svc service is installed (${plan.file} is not there).\n`);
        return;
      }
      const failed = await runSteps(run, plan.disable);
      await unlink(plan.file);
      await runSteps(run, plan.afterRemove);
      if (failed) throw new CliError(`Removed ${plan.file}, but ${failed}; the service manager may still run svc until you log out.`);
      o.err(`Stopped and removed the svc service (${plan.file}).\n`);
    });
}
