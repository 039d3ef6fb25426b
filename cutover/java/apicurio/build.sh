#!/usr/bin/env bash
# Build a runnable Apicurio Registry 2.4.2.Final (Quarkus fast-jar) from Maven Central only.
#   usage: build.sh OUTDIR        -> OUTDIR/quarkus-run.jar (+ lib/, app/, quarkus/)
#   run:   java -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port=PORT -jar OUTDIR/quarkus-run.jar
# Env: MVN (default: mvn), MVN_ARGS (extra args, e.g. -o or -Dmaven.repo.local=...).
set -euo pipefail
out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mvn=${MVN:-mvn}
work=$(mktemp -d "${TMPDIR:-/tmp}/apicurio-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$here/config-index-deployment" "$work/deployment"
mkdir "$work/app" && cp "$here/pom.xml" "$work/app/pom.xml"
# 1. hand-written Quarkus deployment module (not on Maven Central) -> local repo
"$mvn" -B -q -Dstyle.color=never ${MVN_ARGS:-} -f "$work/deployment/pom.xml" install
# 2. unpack apicurio-registry-app + Quarkus augmentation
"$mvn" -B -q -Dstyle.color=never ${MVN_ARGS:-} -f "$work/app/pom.xml" package -Dquarkus.package.type=fast-jar
mkdir -p "$out"
rm -rf "$out/quarkus-run.jar" "$out/lib" "$out/app" "$out/quarkus"
cp -r "$work/app/target/quarkus-app/." "$out/"
echo "built $out/quarkus-run.jar"
