// Reads a JSON list of simulations on stdin, answers one decision per simulation on
// stdout: "Allowed", "ExplicitlyDenied", "ImplicitlyDenied", or "error: ...".
import { runSimulation } from '@cloud-copilot/iam-simulate'

const input = await new Promise((resolve) => {
  let data = ''
  process.stdin.on('data', (chunk) => (data += chunk))
  process.stdin.on('end', () => resolve(data))
})
const answers = []
for (const simulation of JSON.parse(input)) {
  const response = await runSimulation(simulation, {})
  if (response.resultType === 'error') {
    answers.push(`error: ${JSON.stringify(response.errors)}`)
  } else {
    answers.push(response.overallResult)
  }
}
process.stdout.write(JSON.stringify(answers))
