import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `svc serve` as a user service that starts at login: a systemd user unit on Linux, a launchd
 * agent on macOS. This file only says what to write and what to run; the command does it (or,
 * with --dry-run, prints it), through a process runner it is given.
 */

export const UNIT_NAME = 'svc.service';
export const LAUNCHD_LABEL = 'local.svc';
/** Open files the daemon may hold: every app connection, upstream pool and MCP stream is one. */
export const OPEN_FILES = 65536;

export interface ServiceSpec {
  /** the node binary and the svc script it runs, absolute */
  node: string;
  script: string;
  /** `serve` and its flags */
  args: string[];
  /** for the log file of launchd, which keeps no output of its own */
  home: string;
}

export interface ServicePlan {
  /** the file to write, and its text */
  file: string;
  text: string;
  /** what to run once it is written (install) or before it is removed (uninstall) */
  enable: string[][];
  disable: string[][];
  /** what to run after it is removed */
  afterRemove: string[][];
  /** how to read the logs, for the person */
  logs: string;
  /** how to start it by hand, when a daemon of the data dir already runs */
  startLater: string;
  /** what the enable step runs when nothing holds the data dir: enable and start now */
  enableNow: string[][];
  /** folders to create first (launchd does not create its log folder) */
  folders: string[];
}

/** An ExecStart word: quoted when it must be, `%` and `$` doubled (systemd expands both). */
function systemdWord(word: string): string {
  const escaped = word.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  return /^[\w@%+=:,./-]+$/.test(word) ? escaped : `"${escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

const xml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The configuration folder systemd reads user units from ($XDG_CONFIG_HOME, else ~/.config). */
function configHome(env: NodeJS.ProcessEnv, home: string): string {
  const xdg = env.XDG_CONFIG_HOME;
  return xdg && path.isAbsolute(xdg) ? xdg : path.join(home, '.config');
}

export function systemdUnit(spec: ServiceSpec): string {
  return `# svc as a systemd user service: written by \`svc service install\`, removed by \`svc service uninstall\`.
# Logs: journalctl --user -u svc

[Unit]
Description=svc: consent-based access for apps to your local AI
Documentation=man:svc(1)

[Service]
Type=simple
ExecStart=${[spec.node, spec.script, ...spec.args].map(systemdWord).join(' ')}
Restart=on-failure
RestartSec=2
# every app connection, upstream pool and MCP stream holds a file descriptor
LimitNOFILE=${OPEN_FILES}

[Install]
WantedBy=default.target
`;
}

export function launchdAgent(spec: ServiceSpec, logFile: string): string {
  const strings = [spec.node, spec.script, ...spec.args].map((a) => `    <string>${xml(a)}</string>`).join('\n');
  return `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- svc as a launchd agent: written by \`svc service install\`, removed by \`svc service uninstall\`. -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>${LAUNCHD_LABEL}</string>
  <key>ProgramArguments</key>
  <array>
${strings}
  </array>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>SoftResourceLimits</key>
  <dict>
    <key>NumberOfFiles</key>
    <integer>${OPEN_FILES}</integer>
  </dict>
  <key>HardResourceLimits</key>
  <dict>
    <key>NumberOfFiles</key>
    <integer>${OPEN_FILES}</integer>
  </dict>
  <key>StandardOutPath</key>
  <string>${xml(logFile)}</string>
  <key>StandardErrorPath</key>
  <string>${xml(logFile)}</string>
</dict>
</plist>
`;
}

/** What install and uninstall do on this platform; null where svc knows no user service manager. */
export function servicePlan(platform: NodeJS.Platform, spec: ServiceSpec, env: NodeJS.ProcessEnv, uid: number): ServicePlan | null {
  if (platform === 'linux') {
    const file = path.join(configHome(env, spec.home), 'systemd', 'user', UNIT_NAME);
    return {
      file,
      text: systemdUnit(spec),
      enable: [['systemctl', '--user', 'daemon-reload'], ['systemctl', '--user', 'enable', UNIT_NAME]],
      enableNow: [['systemctl', '--user', 'daemon-reload'], ['systemctl', '--user', 'enable', '--now', UNIT_NAME]],
      disable: [['systemctl', '--user', 'disable', '--now', UNIT_NAME]],
      afterRemove: [['systemctl', '--user', 'daemon-reload']],
      logs: 'journalctl --user -u svc',
      startLater: 'systemctl --user start svc',
      folders: [],
    };
  }
  if (platform === 'darwin') {
    const file = path.join(spec.home, 'Library', 'LaunchAgents', `${LAUNCHD_LABEL}.plist`);
    const logFile = path.join(spec.home, 'Library', 'Logs', 'svc', 'svc.log');
    const domain = `gui/${uid}`;
    return {
      file,
      text: launchdAgent(spec, logFile),
      // RunAtLoad starts it as soon as it is loaded, so "enable" and "enable now" are one step here
      enable: [['launchctl', 'bootstrap', domain, file]],
      enableNow: [['launchctl', 'bootstrap', domain, file]],
      disable: [['launchctl', 'bootout', `${domain}/${LAUNCHD_LABEL}`]],
      afterRemove: [],
      logs: `tail -f ${logFile}`,
      startLater: `launchctl kickstart ${domain}/${LAUNCHD_LABEL}`,
      folders: [path.dirname(logFile)],
    };
  }
  return null;
}

/** This package's own `bin/svc.js` (from dist/cli or src/cli alike), which the service runs. */
export const SCRIPT_PATH = fileURLToPath(new URL('../../bin/svc.js', import.meta.url));
