import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { collect } from './body.js';

const tooBig = () => new Error('too big');

/** A readable that, as undici's answer bodies do, errors when destroyed before its end. */
function erringOnDestroy(chunks: string[]) {
  return new Readable({
    read() {
      const next = chunks.shift();
      this.push(next === undefined ? null : Buffer.from(next));
    },
    destroy(err, cb) {
      cb(err ?? new Error('aborted'));
    },
  });
}

describe('collect', () => {
  it('joins the chunks of a stream', async () => {
    expect((await collect(Readable.from([Buffer.from('ab'), Buffer.from('c')]), 10, tooBig)).toString()).toBe('abc');
    expect((await collect(Readable.from([Buffer.from('one')]), 10, tooBig)).toString()).toBe('one');
    expect((await collect(Readable.from([]), 10, tooBig)).length).toBe(0);
  });

  it('fails past the limit and destroys the stream, which may error then without ending the process', async () => {
    const stream = erringOnDestroy(['12345', '67890', 'x']);
    await expect(collect(stream, 8, tooBig)).rejects.toThrow('too big');
    expect(stream.destroyed).toBe(true);
    // the error the destroy brought went to the listener left on
    await new Promise((r) => setImmediate(r));
  });

  it("fails with the stream's error, or on a close before its end", async () => {
    const failing = new Readable({ read() {} });
    const read = collect(failing, 100, tooBig);
    failing.push(Buffer.from('part'));
    failing.destroy(Object.assign(new Error('reset'), { code: 'ECONNRESET' }));
    await expect(read).rejects.toMatchObject({ code: 'ECONNRESET' });

    const closing = new Readable({ read() {} });
    const cut = collect(closing, 100, tooBig);
    closing.push(Buffer.from('part'));
    closing.destroy();
    await expect(cut).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });

    const gone = new Readable({ read() {} });
    gone.destroy();
    await expect(collect(gone, 100, tooBig)).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });

  it('answers nothing for a stream that has already ended', async () => {
    const ended = Readable.from([Buffer.from('x')]);
    await collect(ended, 10, tooBig);
    expect((await collect(ended, 10, tooBig)).length).toBe(0);
  });
});
