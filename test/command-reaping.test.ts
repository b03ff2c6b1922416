/**
 * Never left behind: a stand-in for svc (test/helpers/hostile-stdio/parent.mjs, the built
 * supervisor) starts command servers, some of which ignore both the end of their input and
 * SIGTERM, and is killed with SIGKILL. The watchdog ends them all at once; if the watchdog is
 * killed too, the next start ends them from the record, never a process that merely got a
 * recorded pid again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { CommandSupervisor } from '../src/mcp/command/supervisor.js';
import { Watchdog } from '../src/mcp/command/watchdog.js';
import { requireFreshDist } from './helpers/cli.js';
import { capturedLogger, gone, HOSTILE, running, tempDir } from './helpers/command.js';
import { eventually } from './helpers/wait.js';

interface Started {
  stateful: number;
  stubborn: number;
  grandchild: number;
  grand: number;
  watchdog: number;
}

const procs: ChildProcess[] = [];
const dirs: (() => void)[] = [];
/** process groups a failed test may have left running */
const groups: number[] = [];
afterEach(() => {
  for (const p of procs.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  for (const g of groups.splice(0)) {
    try {
      process.kill(-g, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  for (const d of dirs.splice(0)) d();
});

/** Runs the stand-in parent on a record file and answers the pids it started, once all answered. */
async function startParent(recordFile: string): Promise<{ parent: ChildProcess; pids: Started }> {
  requireFreshDist();
  const parent = spawn(process.execPath, [path.join(HOSTILE, 'parent.mjs'), recordFile], { stdio: ['ignore', 'pipe', 'inherit'] });
  procs.push(parent);
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: parent.stdout! }).once('line', resolve);
    parent.once('exit', (code) => reject(new Error(`the parent exited with ${code} before it started its children`)));
  });
  const pids = JSON.parse(line) as Started;
  groups.push(pids.stateful, pids.stubborn, pids.grandchild);
  return { parent, pids };
}

function newSupervisor(recordFile: string) {
  const log = capturedLogger();
  const sup = new CommandSupervisor({ recordFile, logger: log.logger, maxPerInstance: 4, maxTotal: 4, idleTimeoutMs: 60_000, maxLineBytes: 1 << 20 });
  return { sup, log };
}

function tmpRecord(): string {
  const t = tempDir();
  dirs.push(t.remove);
  return path.join(t.dir, 'command-children.json');
}

describe('command servers after svc is killed with SIGKILL', () => {
  it('the ones that exit at end of input go by themselves, and the watchdog ends the hostile ones and itself at once', async () => {
    const record = tmpRecord();
    const { parent, pids } = await startParent(record);
    for (const pid of Object.values(pids)) expect(running(pid)).toBe(true);
    expect(JSON.parse(readFileSync(record, 'utf8')).children.map((c: any) => c.pid).sort()).toEqual([pids.stateful, pids.stubborn, pids.grandchild].sort());
    parent.kill('SIGKILL');
    await gone(pids.stateful, 'the well-behaved server to exit at the end of its input');
    await gone(pids.stubborn, 'the watchdog to end the server that ignores SIGTERM');
    await gone(pids.grandchild, 'the server with a grandchild to go');
    await gone(pids.grand, 'the watchdog to end the grandchild that ignores SIGTERM');
    await gone(pids.watchdog, 'the watchdog to exit after its job');
    // nothing was left for the next start
    expect(await newSupervisor(record).sup.reapLeftovers()).toBe(0);
  });

  it('with the watchdog killed too, the next start ends the hostile ones from the record', async () => {
    const record = tmpRecord();
    const { parent, pids } = await startParent(record);
    process.kill(pids.watchdog, 'SIGKILL');
    await gone(pids.watchdog, 'the watchdog to be killed');
    parent.kill('SIGKILL');
    await gone(pids.stateful, 'the well-behaved server to exit at the end of its input');
    await gone(pids.grandchild, 'the server with a grandchild to exit at the end of its input');
    // what ignores both lives on...
    if (parent.exitCode === null && parent.signalCode === null) await once(parent, 'exit');
    expect([running(pids.stubborn), running(pids.grand)]).toEqual([true, true]);
    // ...until the next start
    const { sup, log } = newSupervisor(record);
    expect(await sup.reapLeftovers()).toBe(2);
    expect([running(pids.stubborn), running(pids.grand)]).toEqual([false, false]);
    expect(log.lines().filter((l) => l.msg === 'ended a command server left running by an earlier svc')).toHaveLength(2);
    expect(JSON.parse(readFileSync(record, 'utf8')).children).toEqual([]);
  });
});

describe('reaping from the record', () => {
  /** A process in a group of its own that runs until killed. */
  function sleeper(): ChildProcess {
    const p = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60000)'], { detached: true, stdio: 'ignore' });
    procs.push(p);
    return p;
  }

  const bootId = () => readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim();
  const startOf = (pid: number) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  };
  const write = (file: string, boot: string, children: object[]) => writeFileSync(file, JSON.stringify({ version: 1, boot_id: boot, children }));

  it('ends a recorded group whose leader has the recorded start time', async () => {
    const record = tmpRecord();
    const p = sleeper();
    await eventually(() => running(p.pid!), 'the sleeper to run');
    write(record, bootId(), [{ pid: p.pid, pgid: p.pid, start: startOf(p.pid!), instance: 'i', at: new Date().toISOString() }]);
    expect(await newSupervisor(record).sup.reapLeftovers()).toBe(1);
    await gone(p.pid!, 'the recorded sleeper to be ended');
  });

  it('leaves alone a process that got a recorded pid later (another start time), one of another boot, and svc itself', async () => {
    const record = tmpRecord();
    const later = sleeper();
    const otherBoot = sleeper();
    await eventually(() => running(later.pid!) && running(otherBoot.pid!), 'the sleepers to run');
    write(record, bootId(), [
      { pid: later.pid, pgid: later.pid, start: startOf(later.pid!) - 1, instance: 'i', at: '' },
      { pid: process.pid, pgid: process.pid, start: startOf(process.pid) + 5, instance: 'i', at: '' },
      { pid: 1, pgid: 1, start: startOf(1), instance: 'i', at: '' },
    ]);
    expect(await newSupervisor(record).sup.reapLeftovers()).toBe(0);
    write(record, '00000000-0000-0000-0000-000000000000', [{ pid: otherBoot.pid, pgid: otherBoot.pid, start: startOf(otherBoot.pid!), instance: 'i', at: '' }]);
    expect(await newSupervisor(record).sup.reapLeftovers()).toBe(0);
    expect([running(later.pid!), running(otherBoot.pid!)]).toEqual([true, true]);
  });

  it('a damaged record is said in the log and ends nothing', async () => {
    const record = tmpRecord();
    writeFileSync(record, '{"version":1,"children":[{"pid":');
    const { sup, log } = newSupervisor(record);
    expect(await sup.reapLeftovers()).toBe(0);
    expect(log.lines().some((l) => l.msg.includes('record of command servers is damaged'))).toBe(true);
  });
});

describe('the watchdog', () => {
  function sleeper(): ChildProcess {
    const p = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60000)'], { detached: true, stdio: 'ignore' });
    procs.push(p);
    return p;
  }

  it('at the end of its input ends the groups still listed, not those taken off the list, and exits', async () => {
    const [kept, ended, endedToo, other] = [sleeper(), sleeper(), sleeper(), sleeper()];
    await eventually(() => [kept, ended, endedToo, other].every((p) => running(p.pid!)), 'the sleepers to run');
    const log = capturedLogger();
    const listed = [kept.pid!, ended.pid!];
    const watchdog = new Watchdog(log.logger, () => listed);
    // its first word lists what runs (kept and ended) and the new group
    watchdog.add(endedToo.pid!);
    const pid = watchdog.pid!;
    watchdog.remove(kept.pid!);
    watchdog.add(kept.pid!);
    watchdog.remove(kept.pid!);
    watchdog.close();
    await gone(pid, 'the watchdog to exit');
    await gone(ended.pid!, 'a listed group to be ended');
    await gone(endedToo.pid!, 'the group added last to be ended');
    expect([running(kept.pid!), running(other.pid!)]).toEqual([true, true]);
  });
});
