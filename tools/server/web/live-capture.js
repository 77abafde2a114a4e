// An AudioWorklet that hands the microphone's samples (the context's rate, mono) to the page in blocks
// of about 100 ms, so the page sends a few WebSocket messages a second rather than hundreds.
class LiveCapture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.block = new Float32Array(Math.round(sampleRate / 10));
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) {
      for (let i = 0; i < channel.length; ++i) {
        this.block[this.filled++] = channel[i];
        if (this.filled === this.block.length) {
          this.port.postMessage(this.block.slice(0));
          this.filled = 0;
        }
      }
    }
    return true;
  }
}

registerProcessor('live-capture', LiveCapture);
