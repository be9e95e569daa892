// Checks a candidate policy off the page's thread, so the page can stop it
// (worker.terminate) when it runs past a deadline. One message in:
// {bytes, name, pin}; messages out: {type:'stage', stage, text} per passed
// check, then {type:'accepted', checked} or {type:'refused', stage, message}.

import { Refused, checkCandidate, errorText } from './policy.js';

self.onmessage = async ({ data }) => {
  const { bytes, name, pin } = data;
  try {
    const checked = await checkCandidate(bytes, name, pin, (stage, text) => self.postMessage({ type: 'stage', stage, text }));
    self.postMessage({ type: 'accepted', checked });
  } catch (e) {
    self.postMessage({ type: 'refused', stage: e instanceof Refused ? e.stage : 'load', message: errorText(e) });
  }
};
