import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import { inert } from '../text.js';

/**
 * Desktop notifications: a held tool call or a new access request should reach the person even
 * when no review surface is open. Where the desktop has a notifier on the PATH (`notify-send` on
 * Linux, `osascript` on macOS) svc runs it, with every string as its own argument (no shell), app
 * strings made inert, and at most a few a minute (anyone can make access requests).
 */

/** Notifications sent a minute at most; the rest are dropped (the review surfaces still show everything). */
const PER_MINUTE = 6;
/** A notifier that has not finished after this long is stopped. */
const RUN_MS = 5_000;

export interface NotifierOptions {
  enabled: boolean;
  logger: Logger;
  platform?: NodeJS.Platform;
  /** where the notifier is looked for: read at each notification, so a PATH set later counts */
  env?: NodeJS.ProcessEnv;
}

function onPath(name: string, env: NodeJS.ProcessEnv): string | null {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir || !path.isAbsolute(dir)) continue;
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      /* not here */
    }
  }
  return null;
}

/** notify-send bodies may be read as a subset of HTML by the notification server. */
const markupSafe = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export class DesktopNotifier {
  private sent: number[] = [];

  constructor(private readonly opts: NotifierOptions) {}

  /** `title` and `body` may quote an app: both are made inert here. `link` is svc's own URL. */
  notify(title: string, body: string, link: string): void {
    if (!this.opts.enabled) return;
    const now = Date.now();
    this.sent = this.sent.filter((t) => now - t < 60_000);
    if (this.sent.length >= PER_MINUTE) return;
    const env = this.opts.env ?? process.env;
    const platform = this.opts.platform ?? process.platform;
    const summary = inert(title, 120);
    const text = `${inert(body, 300)}\n${inert(link, 500)}`;
    let command: string | null;
    let args: string[];
    if (platform === 'darwin') {
      command = onPath('osascript', env);
      // the strings travel as arguments of the script, never inside its source
      args = ['-e', 'on run argv', '-e', 'display notification (item 2 of argv) with title (item 1 of argv)', '-e', 'end run', summary, text];
    } else {
      command = onPath('notify-send', env);
      args = ['--app-name=svc', '--', summary, markupSafe(text)];
    }
    if (!command) return;
    this.sent.push(now);
    try {
      const child = spawn(command, args, { stdio: 'ignore', env, timeout: RUN_MS });
      child.on('error', (err) => this.opts.logger.debug({ err: err.message }, 'desktop notification failed'));
      child.unref();
    } catch (err) {
      this.opts.logger.debug({ err: (err as Error).message }, 'desktop notification failed');
    }
  }
}
