// transcribe-server's page: a file → its transcript (streamed), the microphone → the Realtime API. It
// uses only the server's public API, so what it shows is what any client gets. This script reads the
// model's capabilities into the controls and sends files; transcript.js shows the result, live.js listens.
'use strict';

// ---------------------------------------------------------------- the model and its controls

async function loadModel() {
  let response;
  try {
    response = await fetch('/v1/models', { headers: authHeaders() });
  } catch (e) {
    text($('model'), 'the server does not answer: ' + e.message);
    return;
  }
  if (response.status === 401) {
    $('key-panel').hidden = false;
    text($('model'), 'an API key is needed');
    text($('key-status'), state.key ? 'That key was refused.' : '');
    $('api-key').focus();
    return;
  }
  if (!response.ok) {
    text($('model'), 'could not read the model: HTTP ' + response.status);
    return;
  }
  const model = (await response.json()).data[0];
  state.model = model.id;
  state.caps = model.capabilities || {};
  $('key-panel').hidden = true;
  text($('model'), `${model.id} (${model.architecture})`);
  applyCapabilities(state.caps);
}

function fillLanguages(select, languages, first) {
  select.replaceChildren();
  if (first) select.append(new Option(first, ''));
  for (const lang of languages) select.append(new Option(lang, lang));
}

function applyCapabilities(caps) {
  const languages = caps.languages || [];
  $('language-row').hidden = !(caps.language_choice && languages.length > 1);
  fillLanguages($('language'), languages, 'the model\'s default');
  $('translate-row').hidden = !caps.translation;
  fillLanguages($('translate-to'), caps.translation ? languages : [], 'no translation');
  $('beam-row').hidden = !caps.beam_search;
  $('hotwords-row').hidden = !caps.hotwords;
  $('prompt-row').hidden = !caps.prompt;
  $('times-word').disabled = !caps.word_timestamps;
  if (!caps.word_timestamps) $('times-segment').checked = true;
  $('speakers-row').hidden = !caps.diarization;
  $('file').disabled = false;
  $('listen').disabled = !caps.realtime;
  if (!caps.realtime) text($('live-status'), 'live transcription is off on this server');
}

$('key-form').addEventListener('submit', (event) => {
  event.preventDefault();
  state.key = $('api-key').value.trim();
  loadModel();
});

// ---------------------------------------------------------------- a file

const drop = $('drop');
drop.addEventListener('dragover', (event) => {
  event.preventDefault();
  drop.classList.add('over');
});
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (event) => {
  event.preventDefault();
  drop.classList.remove('over');
  const file = event.dataTransfer.files[0];
  if (file && !$('file').disabled) transcribeFile(file);
});
$('file').addEventListener('change', () => {
  const file = $('file').files[0];
  if (file) transcribeFile(file);
});

function wantsSpeakers() {
  return state.caps && state.caps.diarization && $('speakers').checked;
}

function wantsWords() {
  return state.caps && state.caps.word_timestamps && $('times-word').checked;
}

// The request: OpenAI's fields, streamed, with every format the page offers made from the one decode
// (our `formats` extension).
function requestForm(file) {
  const form = new FormData();
  form.append('file', file, file.name);
  form.append('model', state.model);
  form.append('stream', 'true');
  const speakers = wantsSpeakers();
  form.append('response_format', speakers ? 'diarized_json' : 'json');
  form.append('formats', 'text,json,srt,vtt,verbose_json' + (speakers ? ',diarized_json' : ''));
  form.append('timestamp_granularities[]', 'segment');
  if (wantsWords()) form.append('timestamp_granularities[]', 'word');
  const caps = state.caps || {};
  if (!$('language-row').hidden && $('language').value) form.append('language', $('language').value);
  if (caps.beam_search && Number($('beam').value) > 0) form.append('beam_size', String(Number($('beam').value)));
  if (caps.hotwords && $('hotwords').value.trim()) form.append('hotwords', $('hotwords').value.trim());
  if (caps.prompt && $('prompt').value.trim()) form.append('prompt', $('prompt').value.trim());
  const target = caps.translation ? $('translate-to').value : '';
  if (target) form.append('target_language', target);
  return { form, route: target ? '/v1/audio/translations' : '/v1/audio/transcriptions' };
}

// Server-sent events from a growing response text: the complete events past OFFSET, and where the
// next one starts.
function sseEvents(body, offset) {
  const events = [];
  for (;;) {
    const end = body.indexOf('\n\n', offset);
    if (end < 0) break;
    for (const line of body.slice(offset, end).split('\n')) {
      if (line.startsWith('data: ')) {
        try {
          events.push(JSON.parse(line.slice(6)));
        } catch (e) {
          events.push({ type: 'error', error: { message: 'unreadable event from the server' } });
        }
      }
    }
    offset = end + 2;
  }
  return { events, offset };
}

function setStatus(message, isError) {
  const status = $('status');
  text(status, message);
  status.classList.toggle('error', !!isError);
}

function transcribeFile(file) {
  if (state.upload) state.upload.abort();
  $('progress').hidden = false;
  text($('file-name'), file.name);
  $('upload-progress').value = 0;
  text($('streaming-text'), '');
  setStatus('uploading…');
  if (state.audioUrl) URL.revokeObjectURL(state.audioUrl);
  state.audioUrl = URL.createObjectURL(file);

  const { form, route } = requestForm(file);
  const xhr = new XMLHttpRequest();
  state.upload = xhr;
  xhr.open('POST', route);
  for (const [name, value] of Object.entries(authHeaders())) xhr.setRequestHeader(name, value);
  const started = performance.now();
  let offset = 0, formats = null, done = false;
  xhr.upload.onprogress = (event) => {
    if (event.lengthComputable) $('upload-progress').value = event.loaded / event.total;
  };
  xhr.upload.onload = () => {
    $('upload-progress').value = 1;
    setStatus('transcribing…');
  };
  xhr.onprogress = () => {
    if (xhr.status !== 200) return;
    const parsed = sseEvents(xhr.responseText, offset);
    offset = parsed.offset;
    for (const event of parsed.events) {
      if (event.type === 'transcript.text.delta') {
        $('streaming-text').append(document.createTextNode(event.delta));
        setStatus(`transcribing… ${((performance.now() - started) / 1000).toFixed(1)} s`);
      } else if (event.type === 'transcript.formats') {
        formats = event.formats;
      } else if (event.type === 'transcript.text.done') {
        done = true;
      } else if (event.type === 'error') {
        setStatus('the transcription failed: ' + (event.error && event.error.message), true);
      }
    }
  };
  xhr.onloadend = () => {
    if (state.upload === xhr) state.upload = null;
    if (xhr.status === 0) {
      if (xhr.readyState === 4 && !done) setStatus('the connection was lost', true);
      return;
    }
    if (xhr.status !== 200) {
      let message = 'HTTP ' + xhr.status;
      try {
        message = JSON.parse(xhr.responseText).error.message;
      } catch (e) { /* not OpenAI's error shape: the status says it */ }
      if (xhr.status === 401) {
        $('key-panel').hidden = false;
        $('api-key').focus();
      }
      setStatus('the server refused the file: ' + message, true);
      return;
    }
    xhr.onprogress();
    if (!done || !formats) return; // an error event said why
    setStatus(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    showResult(file.name, formats);
  };
  xhr.send(form);
}

loadModel();
