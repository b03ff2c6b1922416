import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { Readable } from 'node:stream';

/** What a pump may change on the way: whole units (lines, events) only, never a half of one. */
export interface StreamTransform {
  /** What to send for this chunk now (null: nothing yet). Throws RangeError when one unit outgrows its limit. */
  push(chunk: Buffer): Buffer | string | null;
  /** What is left once the upstream ended. */
  end(): Buffer | string | null;
}

/** Why a stream stopped early: a unit over its limit, the upstream silent past its timeout, or broken off. */
export type StreamBreak = 'too_long' | 'timeout' | 'broken';

/**
 * The one stream pump of the proxies: sends an upstream body on to the app, whose headers the
 * caller has written. It keeps to the app's pace (backpressure), stops reading when the app goes
 * away, and when the upstream fails mid-stream (or a unit outgrows its limit) writes what
 * `onBreak` returns (an error event, or nothing) and ends the response. Resolves once the
 * response is finished or abandoned; it never rejects.
 */
export function pumpStream(res: ServerResponse, source: Readable, transform: StreamTransform | null, onBreak: (why: StreamBreak) => string | null): Promise<void> {
  return new Promise<void>((resolve) => {
    let ended = false;
    const send = (out: Buffer | string | null) => {
      if (out !== null && out.length > 0 && !res.write(out)) {
        source.pause();
        res.once('drain', () => source.resume());
      }
    };
    const stop = (why: StreamBreak) => {
      if (ended) return;
      ended = true;
      source.destroy();
      if (!res.writableEnded && !res.destroyed) {
        const last = onBreak(why);
        if (last) res.write(last);
        res.end();
      }
      resolve();
    };
    source.on('data', (chunk: Buffer) => {
      if (ended) return;
      let out: Buffer | string | null;
      try {
        out = transform ? transform.push(chunk) : chunk;
      } catch {
        stop('too_long');
        return;
      }
      send(out);
    });
    source.once('end', () => {
      if (ended) return;
      ended = true;
      send(transform ? transform.end() : null);
      res.end();
      resolve();
    });
    source.once('error', (err: Error & { code?: string }) => stop(err.code === 'UND_ERR_BODY_TIMEOUT' ? 'timeout' : 'broken'));
    res.once('close', () => {
      if (!ended) {
        ended = true;
        source.destroy();
      }
      resolve();
    });
  });
}

/**
 * Takes the response over from Koa and writes its head: from here the caller alone writes it.
 * What Koa's middleware set before (security headers, CORS) is already on the ServerResponse
 * (Koa's `ctx.set` is `setHeader`), so `writeHead` sends it with `headers`: nobody reaches back.
 */
export function takeResponse(ctx: Pick<Context, 'res' | 'respond'>, status: number, headers: OutgoingHttpHeaders): ServerResponse {
  ctx.respond = false;
  ctx.res.writeHead(status, headers);
  return ctx.res;
}
