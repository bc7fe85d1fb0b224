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
      const item = { name: file.name || "pasted.png", state: "uploading", ref: null, message: "" };
      item.promise = this.upload(item, file);
      this.items.push(item);
    }
    this.render();
  }

  async upload(item, file) {
    if (!this.ready()) { item.state = "failed"; item.message = "not connected"; this.render(); return; }
    const path = "/api/conversations/" + encodeURIComponent(this.chatId()) + "/uploads?name=" + encodeURIComponent(item.name);
    try {
      const res = await fetch(path, { method: "POST", credentials: "same-origin", headers: this.headers(), body: file });
      const body = await res.json();
      if (res.ok) Object.assign(item, { state: "done", ref: body.ref, name: body.name });
      else Object.assign(item, { state: "failed", message: body.message || "refused" });
    } catch {
      Object.assign(item, { state: "failed", message: "the upload failed" });
    }
    this.render();
  }

  /** The uploaded files for a message (waiting for those still uploading); the chips are cleared. */
  async take() {
    await Promise.all(this.items.map((i) => i.promise));
    const done = this.items.filter((i) => i.state === "done").map((i) => ({ ref: i.ref, name: i.name }));
    this.items = [];
    this.render();
    return done;
  }

  get pending() { return this.items.length > 0; }

  render() {
    this.list.replaceChildren(...this.items.map((item) => {
      const chip = document.createElement("span");
      chip.className = "file-chip " + item.state;
      chip.textContent = item.name + (item.state === "uploading" ? " (uploading…)" : item.state === "failed" ? " — " + item.message : "");
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "ghost";
      remove.textContent = "×";
      remove.setAttribute("aria-label", "Remove " + item.name);
      remove.addEventListener("click", () => { this.items = this.items.filter((i) => i !== item); this.render(); });
      chip.append(remove);
      return chip;
    }));
    this.list.hidden = this.items.length === 0;
  }
}
