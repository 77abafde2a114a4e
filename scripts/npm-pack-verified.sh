# Sourced by the fetch scripts: npm_pack_verified PKG INTEGRITY DIR TAG runs `npm pack PKG` in DIR,
# checks the tarball against its pinned sha512 integrity and prints the tarball's path.
npm_pack_verified() {
    local pkg="$1" integrity="$2" dir="$3" tag="$4" tgz actual
    echo "$tag: npm pack $pkg" >&2
    (cd "$dir" && npm pack "$pkg" --silent >/dev/null)
    tgz="$(ls "$dir"/*.tgz)"
    actual="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
    if [ "$actual" != "$integrity" ]; then
        echo "$tag: integrity mismatch for $pkg: got $actual" >&2
        return 1
    fi
    echo "$tgz"
}
