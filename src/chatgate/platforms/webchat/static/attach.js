// Files for the next message: the picker, drag and drop onto the page, and pasted images.
// Each is uploaded at once (POST /api/conversations/{chat}/uploads, docs/webchat-protocol.md)
// and shown as a chip; the message frame names the signed refs the gateway answered.

const MAX_FILES = 10;

export class Attachments {
  /**
   * @param {() => string} chatId the conversation the files go to
   * @param {() => Record<string, string>} headers the conversation endpoints' headers
   * @param {() => boolean} ready whether the conversation's hello was answered (it is claimed)
   */
  constructor(chatId, headers, ready) {
    this.chatId = chatId;
    this.headers = headers;
    this.ready = ready;
    this.items = []; // {name, state: "uploading" | "done" | "failed", ref, message, promise}
    this.list = document.getElementById("files");
    this.picker = document.getElementById("file");
  }

  wire(composer) {
    document.getElementById("attach").addEventListener("click", () => this.picker.click());
    this.picker.addEventListener("change", () => { this.add(this.picker.files); this.picker.value = ""; });
    document.addEventListener("dragover", (ev) => { if (ev.dataTransfer?.types.includes("Files")) ev.preventDefault(); });
    document.addEventListener("drop", (ev) => {
      if (!ev.dataTransfer?.files.length) return;
      ev.preventDefault();
      this.add(ev.dataTransfer.files);
    });
    composer.addEventListener("paste", (ev) => {
      const files = [...(ev.clipboardData?.files || [])];
      if (files.length) { ev.preventDefault(); this.add(files); }
    });
  }

  add(files) {
    for (const file of files) {
      if (this.items.length >= MAX_FILES) break;
      const item = { name: file.name || "pasted.png", file, state: "uploading", ref: null, message: "" };
      this.items.push(item);
      this.start(item);
    }
    this.render();
  }

  /** (Again) upload ``item``; its promise settles when it is done, failed or cancelled. */
  start(item) {
    Object.assign(item, { state: "uploading", message: "", loaded: 0, total: item.file.size });
    item.promise = this.upload(item);
  }

  /** One upload by XMLHttpRequest, whose upload events say how far it got (fetch has none). */
  upload(item) {
    if (!this.ready()) { Object.assign(item, { state: "failed", message: "not connected" }); return Promise.resolve(); }
    const path = "/api/conversations/" + encodeURIComponent(this.chatId()) + "/uploads?name=" + encodeURIComponent(item.name);
    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      item.xhr = xhr;
      xhr.open("POST", path);
      xhr.withCredentials = true;
      for (const [key, value] of Object.entries(this.headers())) xhr.setRequestHeader(key, value);
      xhr.upload.onprogress = (ev) => { item.loaded = ev.loaded; item.total = ev.total || item.total; this.progress(item); };
      const end = (changes) => { item.xhr = null; Object.assign(item, changes); this.render(); resolve(); };
      xhr.onload = () => {
        let body = {};
        try { body = JSON.parse(xhr.responseText); } catch { /* not JSON: said below */ }
        if (xhr.status >= 200 && xhr.status < 300 && body.ref) end({ state: "done", ref: body.ref, name: body.name || item.name });
        else end({ state: "failed", message: body.message || "refused (" + xhr.status + ")" });
      };
      xhr.onerror = () => end({ state: "failed", message: "the upload failed" });
      xhr.onabort = () => end({ state: "cancelled" });
      xhr.send(item.file);
    });
  }

  /** Cancel an upload (or drop a file): it is not sent with the message. */
  remove(item) {
    this.items = this.items.filter((i) => i !== item);
    item.xhr?.abort();
    this.render();
  }

  progress(item) {
    if (!item.bar) return;
    item.bar.max = item.total || 1;
    item.bar.value = item.loaded;
    item.bar.setAttribute("aria-valuetext", percent(item) + "%");
  }

  /** The uploaded files for a message (waiting for those still uploading); their chips are cleared,
   * a failed one's stays. */
  async take() {
    await Promise.all(this.items.map((i) => i.promise));
    const done = this.items.filter((i) => i.state === "done").map((i) => ({ ref: i.ref, name: i.name }));
    this.items = this.items.filter((i) => i.state === "failed"); // kept, to retry or remove
    this.render();
    return done;
  }

  get pending() { return this.items.length > 0; }

  render() {
    this.list.replaceChildren(...this.items.map((item) => this.chip(item)));
    this.list.hidden = this.items.length === 0;
  }

  /** A file's chip: its name, then a progress bar and Cancel while uploading, the reason and
   * Retry after a failure, Remove once uploaded. */
  chip(item) {
    const chip = document.createElement("span");
    chip.className = "file-chip " + item.state;
    chip.append(item.name);
    item.bar = null;
    if (item.state === "uploading") {
      item.bar = document.createElement("progress");
      item.bar.setAttribute("aria-label", "Uploading " + item.name);
      this.progress(item);
      chip.append(item.bar);
    } else if (item.state === "failed") {
      chip.append(" — " + item.message);
      chip.append(button("Retry", "Retry uploading " + item.name, "retry", () => { this.start(item); this.render(); }));
    }
    const cancel = item.state === "uploading" ? "Cancel uploading " : "Remove ";
    chip.append(button("×", cancel + item.name, "ghost", () => this.remove(item)));
    return chip;
  }
}

function percent(item) {
  return item.total ? Math.floor((100 * item.loaded) / item.total) : 0;
}

function button(text, label, cls, onClick) {
  const node = document.createElement("button");
  node.type = "button";
  node.className = cls;
  node.textContent = text;
  node.setAttribute("aria-label", label);
  node.addEventListener("click", onClick);
  return node;
}
