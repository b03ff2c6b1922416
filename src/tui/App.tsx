import { Box } from 'ink';
import { currentCall } from './actions.js';
import { CallDetail, HeldCallRows } from './components/HeldCalls.js';
import { GrantList, GrantTools } from './components/Grants.js';
import { Header } from './components/Header.js';
import { KeyHints } from './components/KeyHints.js';
import { RequestDetail } from './components/RequestDetail.js';
import { RequestList } from './components/RequestList.js';
import { AppsView } from './components/AppsView.js';
import { StatusLine } from './components/StatusLine.js';
import { safe } from './format.js';
import { detailSecondsLeft, useUIState } from './state.js';

export interface AppProps {
  width: number;
  height: number;
  color: boolean;
  /** Who is reviewing, shown top right. */
  user?: string;
}

/** Header, then the list or the detail, then the status line and the keys. Reads state; never acts. */
export function App({ width, height, color, user }: AppProps) {
  const s = useUIState();
  // Header (2) + status (2) + keys (1), and one line spare so Ink never scrolls an 80x24 terminal.
  const body = Math.max(3, height - 6);
  const who = user ? safe(user, 40) : '';
  const d = s.screen === 'detail' ? s.detail : null;
  const apps = s.view === 'apps';
  const call = s.screen === 'call' ? s.calls.find((c) => c.id === s.callId) : undefined;
  // what `a` and `d` decide now, as the footer names it
  const onCall = apps ? undefined : currentCall(s);
  const title = apps
    ? 'svc review: apps you let in'
    : d
      ? `svc review › ${d.data ? safe(d.data.app_name ?? d.data.app_client_id, 60) : 'loading'}`
      : s.screen === 'call'
        ? 'svc review › held tool call'
        : s.screen === 'grants' || s.screen === 'grant'
          ? 'svc review › tool choices of your grants'
          : // `pending` is what people say; `draft` is the status the CLI and API show: named once, here
            'svc review: pending (draft) access requests';
  const aside = apps
    ? [`${s.apps.grants.length} active`, who].filter(Boolean).join(' · ')
    : s.screen !== 'list'
      ? who
      : [...(s.calls.length ? [`${s.calls.length} held`] : []), `${s.requests.length} pending`, who].filter(Boolean).join(' · ');
  // held calls come first, above the requests, with up to half the screen
  const callLines = s.calls.length ? Math.min(1 + 2 * s.calls.length, Math.max(3, Math.floor(body / 2))) : 0;
  return (
    <Box flexDirection="column" width={width}>
      <Header title={title} aside={aside} width={width} color={color} />
      <Box flexDirection="column" height={body} overflow="hidden">
        {apps ? (
          <AppsView apps={s.apps} width={width} height={body} color={color} now={s.now} />
        ) : s.screen === 'call' ? (
          <CallDetail call={call} now={s.now} width={width} height={body} color={color} />
        ) : s.screen === 'grants' ? (
          <GrantList grants={s.grants} cursor={s.grantCursor} width={width} height={body} color={color} />
        ) : s.screen === 'grant' ? (
          <GrantTools data={s.grant?.data ?? null} now={s.now} picks={s.grant?.picks ?? {}} cursor={s.grant?.cursor ?? 0} width={width} height={body} color={color} />
        ) : d ? (
          <RequestDetail
            data={d.data}
            role={d.role}
            selected={d.selected}
            cursor={d.cursor}
            secondsLeft={detailSecondsLeft(d, s.now)}
            picks={d.picks}
            limits={d.limits}
            editing={d.editing}
            width={width}
            height={body}
            color={color}
          />
        ) : (
          <Box flexDirection="column" width={width}>
            {callLines > 0 ? <HeldCallRows calls={s.calls} cursor={s.cursor < s.calls.length ? s.cursor : -1} now={s.now} width={width} height={callLines} color={color} /> : null}
            <RequestList requests={s.requests} cursor={s.cursor - s.calls.length} loaded={s.loaded} now={s.now} width={width} height={body - callLines} color={color} />
          </Box>
        )}
      </Box>
      <Box height={2} overflow="hidden" width={width}>
        <StatusLine notice={s.notice} pollError={s.pollError} busy={s.busy} color={color} />
      </Box>
      <KeyHints
        screen={apps ? (s.apps.edit ? 'limits' : s.apps.confirmRevoke ? 'confirm' : 'apps') : s.screen}
        color={color}
        decidable={s.detail?.data?.status === 'draft' && detailSecondsLeft(s.detail, s.now) > 0}
        onCall={!apps && onCall !== undefined}
        target={onCall ? `${safe(onCall.tool, 40)} of ${safe(onCall.app_name ?? onCall.app_client_id, 30)}` : d?.data ? `the request of ${safe(d.data.app_name ?? d.data.app_client_id, 40)}` : undefined}
        held={s.calls.length}
      />
    </Box>
  );
}
