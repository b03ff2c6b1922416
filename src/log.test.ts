import { PassThrough } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createLogger } from './log.js';

/** What a person sees on a terminal for what is logged through `log`. */
async function humanOutput(lines: number, log: (logger: ReturnType<typeof createLogger>) => void): Promise<string> {
  const out = new PassThrough();
  let text = '';
  out.on('data', (chunk) => (text += chunk));
  log(createLogger('info', out, 'human'));
  await vi.waitFor(() => expect(text.split('\n').length - 1).toBeGreaterThanOrEqual(lines));
  return text;
}

describe('human log lines', () => {
  it("keep an app's name, a model and a field's value one word each, so none passes for more of the line", async () => {
    const text = await humanOutput(2, (logger) => {
      logger.info({ method: 'POST', path: '/v1/chat/completions', status: 200, ms: 3, app: 'Notes grant ffffffff model gpt-x', grant: 'a1b2c3d4e5', model: 'm1 tool rm' }, 'request');
      logger.warn({ client: 'evil user=admin', plain: 'fine' }, 'something');
    });
    expect(text).toContain('"Notes grant ffffffff model gpt-x" grant a1b2c3d4… model "m1 tool rm"');
    expect(text).toContain('client="evil user=admin" plain=fine');
    // and never a second line
    expect(text.trim().split('\n')).toHaveLength(2);
  });
});
