import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './log.js';
import { StartSteps } from './start-steps.js';

function logged() {
  const lines: Record<string, unknown>[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger('warn', out), lines };
}

describe('StartSteps', () => {
  it('undoes finished steps in exactly the reverse of the order they ran, each once', async () => {
    const { logger } = logged();
    const undone: string[] = [];
    const steps = new StartSteps(logger);
    const a = await steps.run('a', () => 1, (v) => undone.push(`a${v}`));
    await steps.run('b', async () => 'nothing to undo');
    await steps.run('c', async () => a + 1, (v) => undone.push(`c${v}`));
    expect(steps.names()).toEqual(['a', 'c']);
    await steps.stop();
    expect(undone).toEqual(['c2', 'a1']);
    await steps.stop();
    expect(undone).toEqual(['c2', 'a1']);
  });

  it('a step that throws records nothing; the steps before it are undone, a failing undo is logged by name and the rest still run', async () => {
    const { logger, lines } = logged();
    const undone: string[] = [];
    const steps = new StartSteps(logger);
    await steps.run('lock', () => undefined, () => undone.push('lock'));
    await steps.run('socket', () => undefined, () => Promise.reject(new Error('busy')));
    await expect(steps.run('app', () => Promise.reject(new Error('no app')), () => undone.push('app'))).rejects.toThrow('no app');
    await steps.stop();
    expect(undone).toEqual(['lock']);
    expect(lines).toEqual([expect.objectContaining({ msg: 'shutdown step failed', step: 'socket', err: 'busy' })]);
  });

  it('checks before each step whether the start was called off, and then runs nothing more', async () => {
    const { logger } = logged();
    let called = false;
    const steps = new StartSteps(logger, () => {
      if (called) throw new Error('called off');
    });
    const ran: string[] = [];
    await steps.run('first', () => ran.push('first'));
    called = true;
    await expect(steps.run('second', () => ran.push('second'))).rejects.toThrow('called off');
    expect(ran).toEqual(['first']);
  });
});
